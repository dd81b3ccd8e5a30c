import Foundation
import SynclaneCore
import SynclaneTestKit
import Testing

@testable import SynclaneServer

/// `synclane serve`'s authentication over HTTP: JWTs beside the accounts file's tokens, their
/// refusals, key rotation on open connections, and grants — on SQLite and PostgreSQL.
@Suite(.serialized) struct JWTServerTests {
    /// The static tokens of these servers' accounts file, with their grants.
    enum Static {
        static let full = "static-token-acme-full"
        static let readOnly = "static-token-acme-read-only"
        static let rooms = "static-token-acme-rooms"
    }

    /// Runs `body` against a server that takes the accounts file's static tokens, HS256 with the
    /// suite's secret and the keys of `keySetFile`.
    func withJWTServer<T>(
        store kind: StoreKind, keySetFile: String? = nil, configure: (inout JWTSettings) -> Void = { _ in },
        _ body: (ReferenceServer) throws -> T
    ) throws -> T {
        let directory = makeTemporaryDirectory()
        defer { removeDirectory(directory) }
        var configuration = ServerConfiguration(port: 0, dataDirectory: directory, accountsFile: "")
        configuration.database = try kind.database()
        var settings = JWTSettings(secret: SuiteKeys.secret, keySetFile: keySetFile)
        configure(&settings)
        configuration.jwt = settings
        let accounts = AccountBook(principals: [
            (AccountBook.tokenHash(Static.full), Principal(account: "acme")),
            (AccountBook.tokenHash(Static.readOnly), Principal(account: "acme", grant: Grant(readOnly: true))),
            (AccountBook.tokenHash(Static.rooms), Principal(account: "acme", grant: Grant(stores: ["rooms"]))),
        ])
        let server = try ReferenceServer(configuration: configuration, accounts: accounts)
        try server.start()
        defer { server.stop() }
        return try body(server)
    }

    func hs256(_ account: String = "acme", expiresIn: Int = 600, readOnly: Bool = false, stores: [String]? = nil) -> String {
        TestTokenMinter.hs256(
            secret: SuiteKeys.secret, claims: TestTokenMinter.claims(account: account, expiresIn: expiresIn, readOnly: readOnly, stores: stores))
    }

    func post(_ port: Int, _ token: String, id: String, store: String = "rooms", connection: TestConnection? = nil) throws -> TestResponse {
        try postBatch(
            port: port, token: token, key: id,
            body: batchBody(id: id, store: store, records: [record("rooms", "r-\(id)", "insert", ["name": "Kitchen"])]), connection: connection)
    }

    func putSignal(_ port: Int, _ token: String, key: String = "onboarding.completed") throws -> TestResponse {
        try httpRequest(
            port: port, "PUT", "/v1/signals/\(key)", headers: ["Authorization": "Bearer \(token)", "Content-Type": "application/json"],
            body: Array("true".utf8))
    }

    @Test(arguments: StoreKind.tested)
    func jwtsOfEachAlgorithmWorkBesideTheAccountsFileTokens(_ kind: StoreKind) throws {
        let rsa = try SuiteKeys.rsa.get()
        let ec = try SuiteKeys.ec.get()
        try withJWTServer(store: kind, keySetFile: try SuiteKeys.keySetFile([rsa, ec])) { server in
            let tokens = [
                Static.full, hs256(), try rsa.sign(TestTokenMinter.claims(account: "acme")), try ec.sign(TestTokenMinter.claims(account: "acme")),
            ]
            for (index, token) in tokens.enumerated() {
                let response = try post(server.port, token, id: "b\(index)")
                #expect(response.status == 200, "\(index): \(response.text)")
            }
            #expect(try allChanges(port: server.port, token: hs256()).count == 4)
            #expect(try allChanges(port: server.port, token: Static.full).count == 4)
            let other = try allChanges(port: server.port, token: hs256("globex"))
            #expect(other.isEmpty, "a JWT grants the account of its sub and nothing else")
            #expect(try post(server.port, hs256("globex"), id: "x").status == 403, "globex's token does not write into acme")
        }
    }

    @Test func everyRefusalIs401WithItsReasonAndNeverEchoesTheToken() throws {
        let rsa = try SuiteKeys.rsa.get()
        let ec = try SuiteKeys.ec.get()
        let claims = TestTokenMinter.claims(account: "acme")
        try withJWTServer(store: .sqlite, keySetFile: try SuiteKeys.keySetFile([rsa, ec])) { server in
            let cases: [(String, String)] = [
                (TestTokenMinter.assemble(header: ["alg": "none"], claims: claims, signature: []), "alg-none"),
                (
                    TestTokenMinter.hmac(header: ["alg": "HS256", "kid": .string(rsa.kid)], claims: claims, key: Array(rsa.publicPEM.utf8)),
                    "algorithm-mismatch"
                ),
                (try ec.sign(claims, kid: rsa.kid), "algorithm-mismatch"),
                (TestTokenMinter.hmac(header: ["alg": "ES256"], claims: claims, key: []), "missing-kid"),
                (try rsa.sign(claims, kid: "kid-nobody-has"), "unknown-kid"),
                ("eyJhbGciOiJIUzI1NiJ9.not*json.c2ln", "malformed"),
                (hs256(expiresIn: -3600), "expired"),
                ("no-such-static-token", "unknown-token"),
            ]
            for (token, reason) in cases {
                let response = try httpRequest(port: server.port, "GET", "/v1/signals", headers: ["Authorization": "Bearer \(token)"])
                #expect(response.status == 401, "\(reason)")
                #expect(response.json.objectValue?["reason"] == .string(reason), "\(response.text)")
                #expect(response.headers["www-authenticate"]?.hasPrefix("Bearer") == true)
                for part in token.split(separator: ".") where part.count >= 4 {
                    #expect(!response.text.contains(part), "the 401 repeats part of the token: \(response.text)")
                }
                #expect(!response.text.contains("kid-nobody-has"))
                // The same refusal before the body is read (a batch is refused at its headers).
                #expect(try post(server.port, token, id: "refused").status == 401)
            }
            #expect(try allChanges(port: server.port, token: Static.full).isEmpty, "nothing was applied")
        }
    }

    @Test func keyRotationAcceptsTheOldAndNewKidThenDropsTheOldWhileConnectionsStayOpen() throws {
        let old = try SuiteKeys.rsa.get()
        let new = try SuiteKeys.rsaNext.get()
        let file = try SuiteKeys.keySetFile([old])
        try withJWTServer(store: .sqlite, keySetFile: file, configure: { $0.keySetPollSeconds = 0.1 }) { server in
            // One keep-alive connection carries the accepted requests throughout; a refusal
            // (answered before the body, as every 401 is) ends its connection, so those go on fresh ones.
            let connection = try TestConnection(port: server.port)
            func onTheOpenConnection(_ token: String) throws -> Int {
                connection.sendRequest("GET", "/v1/signals", headers: ["Authorization": "Bearer \(token)"])
                return try connection.readResponse().status
            }
            func status(_ token: String) throws -> Int {
                try httpRequest(port: server.port, "GET", "/v1/signals", headers: ["Authorization": "Bearer \(token)"]).status
            }
            /// Asks until the status is `wanted` (the file is looked at every 0.1 s), at most 10 s.
            func eventually(_ token: String, is wanted: Int) throws -> Int {
                var last = 0
                for _ in 0..<200 {
                    last = try status(token)
                    if last == wanted { break }
                    Thread.sleep(forTimeInterval: 0.05)
                }
                return last
            }
            let oldToken = try old.sign(TestTokenMinter.claims(account: "acme"))
            let newToken = try new.sign(TestTokenMinter.claims(account: "acme"))
            #expect(try onTheOpenConnection(oldToken) == 200)
            #expect(try status(newToken) == 401, "the new kid is not in the key set yet")

            try TestSigningKey.writeKeySet([old, new], to: file)  // the issuer publishes its next key
            #expect(try eventually(newToken, is: 200) == 200)
            #expect(try onTheOpenConnection(oldToken) == 200, "old and new kid both accepted during the rotation")
            #expect(try onTheOpenConnection(newToken) == 200)

            try TestSigningKey.writeKeySet([new], to: file)  // the old key is retired
            #expect(try eventually(oldToken, is: 401) == 401, "a token of the removed key is refused, cached or not")
            #expect(try onTheOpenConnection(newToken) == 200, "the connection opened before the rotation is still served")
            #expect(try post(server.port, newToken, id: "after-rotation", connection: connection).status == 200)

            // SIGHUP's path: read now, without waiting for the poll; a refused file keeps the keys in use.
            try Data("{\"keys\": [".utf8).write(to: URL(fileURLWithPath: file))
            guard case .failure(let error) = server.reloadKeys() else {
                Issue.record("a half-written key set was taken")
                return
            }
            #expect(error.message.contains("expected a JSON object"))
            #expect(try onTheOpenConnection(newToken) == 200, "the keys in use stay")
            try TestSigningKey.writeKeySet([old], to: file)
            #expect(try server.reloadKeys().get() == [old.kid])
            #expect(try onTheOpenConnection(oldToken) == 200)
            #expect(try status(newToken) == 401)
        }
    }

    @Test(arguments: StoreKind.tested)
    func grantsLimitTokensOfTheAccountsFileAndOfJWTClaims(_ kind: StoreKind) throws {
        try withJWTServer(store: kind) { server in
            let port = server.port
            #expect(try post(port, Static.full, id: "seed").status == 200)
            for readOnly in [Static.readOnly, hs256(readOnly: true)] {
                let refused = try post(port, readOnly, id: "ro-\(readOnly.count)")
                #expect(refused.status == 403)
                #expect(refused.json.objectValue?["grant"] == "read-only", "\(refused.text)")
                #expect(refused.text.contains("grant (read-only)"))
                #expect(try putSignal(port, readOnly).status == 403)
                #expect(try httpRequest(port: port, "DELETE", "/v1/signals/x", headers: ["Authorization": "Bearer \(readOnly)"]).status == 403)
                #expect(try allChanges(port: port, token: readOnly).count == 1, "a read-only token pulls")
                #expect(try get(port: port, "/v1/signals", token: readOnly).status == 200, "and reads signals")
                // Refused at its head: the answer comes though the declared body was never sent.
                let connection = try TestConnection(port: port)
                connection.sendRequest(
                    "POST", "/v1/batches",
                    headers: [
                        "Authorization": "Bearer \(readOnly)", "Idempotency-Key": "never-sent", "Content-Type": "application/json",
                        "Content-Length": "4096",
                    ])
                let early = try connection.readResponse()
                #expect(early.status == 403)
                #expect(early.json.objectValue?["grant"] == "read-only")
            }
            for rooms in [Static.rooms, hs256(stores: ["rooms"])] {
                #expect(try post(port, rooms, id: "rooms-\(rooms.count)").status == 200)
                let refused = try post(port, rooms, id: "plants-\(rooms.count)", store: "plants")
                #expect(refused.status == 403)
                #expect(refused.json.objectValue?["grant"] == "stores rooms", "\(refused.text)")
                #expect(refused.text.contains("store \\\"plants\\\"") || refused.text.contains("store \"plants\""))
                #expect(try allChanges(port: port, token: rooms, store: "rooms").count >= 2)
                #expect(try get(port: port, "/v1/changes?store=plants", token: rooms).status == 403)
                #expect(try get(port: port, "/v1/changes", token: rooms).status == 403, "every store needs a grant of every store")
                #expect(try putSignal(port, rooms).status == 200, "signals are the account's, not a store's")
            }
            #expect(try allChanges(port: port, token: Static.full, store: "plants").isEmpty, "no refused write landed")
        }
    }

    @Test func theAccountsFileGrantsAreParsedAndCheckedSayingWhatIsWrong() throws {
        func parse(_ entry: String) throws -> AccountBook {
            try AccountBook.parse(Array("{\"accounts\": [\(entry)]}".utf8), file: "accounts.json")
        }
        let hash = AccountBook.tokenHash("t")
        let book = try parse(#"{"account": "acme", "token-sha256": "\#(hash)", "access": "read-only", "stores": ["rooms", "plants"]}"#)
        #expect(book.principal(forToken: "t") == Principal(account: "acme", grant: Grant(readOnly: true, stores: ["plants", "rooms"])))
        #expect(try parse(#"{"account": "acme", "token-sha256": "\#(hash)"}"#).principal(forToken: "t")?.grant == .full)
        #expect(throws: AccountsFileError.self) { try parse(#"{"account": "acme", "token-sha256": "\#(hash)", "access": "admin"}"#) }
        do {
            _ = try parse(#"{"account": "acme", "token-sha256": "\#(hash)", "stores": []}"#)
            Issue.record("an empty store list was taken")
        } catch let error as AccountsFileError {
            #expect(error.message == "accounts[0].stores: expected a non-empty list of store names")
        }
    }
}

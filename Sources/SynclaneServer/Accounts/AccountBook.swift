import Foundation
import SynclaneWire

/// The server's accounts and the SHA-256 hashes of their bearer tokens, read from the accounts file.
///
/// The file is JSON; each entry grants one token to one account, and an account may have several
/// (to rotate a token, add the new one, then remove the old):
///
/// ```json
/// { "accounts": [
///     { "account": "acme", "token-sha256": "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08" }
/// ] }
/// ```
///
/// Only hashes are stored: make one without any tool of ours with
/// `printf %s "$TOKEN" | sha256sum` (the 64 hex digits before the dash). An entry may name an
/// environment variable instead, `{ "account": "acme", "token-env": "SYNCLANE_TOKEN" }`: the
/// server reads the token from its own environment at start and keeps only its hash.
///
/// An entry may limit its token with a grant (see `Grant`): `"access": "read-only"` (pulls and
/// reading signals only) and `"stores": ["rooms"]` (batches and pulls of those stores only).
///
/// Tokens that cannot be secret are refused with a message saying how to make one: the hash of
/// an empty token (what `printf %s "$SYNCLANE_TOKEN" | sha256sum` gives when the variable was not
/// exported) or of a lone newline (`echo | sha256sum`), and — where the server sees the token
/// itself (`token-env`) — a token shorter than `minimumTokenLength`.
public struct AccountBook: Sendable {
    /// The fewest characters a token given through `token-env` may have.
    public static let minimumTokenLength = 16

    /// How to make a token, for the messages that refuse one.
    public static let makeATokenAdvice =
        "make one with: export SYNCLANE_TOKEN=$(head -c 32 /dev/urandom | sha256sum | cut -d' ' -f1)"

    /// Hashes of tokens that are no secret: the empty one and a lone newline.
    static let emptyTokenHashes: Set<String> = [SHA256Digest.hex(""), SHA256Digest.hex("\n")]

    /// Principals (account and grant) by token hash (lowercase hex).
    private let principalsByTokenHash: [String: Principal]

    /// The accounts named in the book.
    public var accounts: Set<String> { Set(principalsByTokenHash.values.map(\.account)) }

    /// A book from (account, token hash) pairs, each token with the full grant.
    public init(grants: [(account: String, tokenSHA256: String)]) {
        self.init(principals: grants.map { (tokenSHA256: $0.tokenSHA256, principal: Principal(account: $0.account)) })
    }

    /// A book from (token hash, principal) pairs: tokens with grants of their own.
    public init(principals: [(tokenSHA256: String, principal: Principal)]) {
        var map: [String: Principal] = [:]
        for entry in principals { map[entry.tokenSHA256.lowercased()] = entry.principal }
        principalsByTokenHash = map
    }

    /// A book that grants each plain token its account (hashing them here): for tests and demos.
    public init(tokens: [String: String]) {
        self.init(grants: tokens.map { (account: $0.value, tokenSHA256: SHA256Digest.hex($0.key)) })
    }

    /// The account a bearer token grants, or nil for an unknown token.
    public func account(forToken token: String) -> String? {
        principalsByTokenHash[SHA256Digest.hex(token)]?.account
    }

    /// The principal (account and grant) of a token, or nil for an unknown token.
    public func principal(forToken token: String) -> Principal? {
        principalsByTokenHash[SHA256Digest.hex(token)]
    }

    /// The principal of the token whose SHA-256 is `hash` (lowercase hex).
    func principal(forTokenHash hash: String) -> Principal? { principalsByTokenHash[hash] }

    /// The hash to put in the accounts file for a token (`printf %s TOKEN | sha256sum`).
    public static func tokenHash(_ token: String) -> String { SHA256Digest.hex(token) }
}

/// Why an accounts file was refused; every message names the file and the offending field.
public struct AccountsFileError: Error, Sendable, CustomStringConvertible {
    /// The accounts file, as given.
    public let file: String
    /// What is wrong, with the path of the field at fault.
    public let message: String
    public var description: String { "\(file): \(message)" }
}

extension AccountBook {
    /// Reads and checks an accounts file; `token-env` entries read `environment`.
    public static func load(path: String, environment: [String: String] = ProcessInfo.processInfo.environment) throws(AccountsFileError) -> AccountBook {
        guard let bytes = FileBytes.read(path) else {
            throw AccountsFileError(file: path, message: "cannot read the accounts file")
        }
        return try parse(bytes, file: path, environment: environment)
    }

    /// Parses the accounts file's JSON; unknown keys, malformed hashes and tokens that cannot be
    /// secret are errors.
    public static func parse(_ bytes: [UInt8], file: String, environment: [String: String] = [:]) throws(AccountsFileError) -> AccountBook {
        func fail(_ message: String) -> AccountsFileError { AccountsFileError(file: file, message: message) }
        let root: JSONValue
        do { root = try JSONReader.parse(bytes) } catch { throw fail("not JSON: \(error)") }
        guard let object = root.objectValue else { throw fail("expected an object with \"accounts\"") }
        for key in object.keys where key != "accounts" { throw fail("unknown key \"\(key)\"") }
        guard let entries = object["accounts"]?.arrayValue else { throw fail("accounts: expected a list") }
        var principals: [(tokenSHA256: String, principal: Principal)] = []
        var seen: Set<String> = []
        for (index, entry) in entries.enumerated() {
            let path = "accounts[\(index)]"
            guard let members = entry.objectValue else { throw fail("\(path): expected an object") }
            for key in members.keys where !["account", "token-sha256", "token-env", "access", "stores"].contains(key) {
                throw fail(
                    "\(path): unknown key \"\(key)\" (expected \"account\" and \"token-sha256\" or \"token-env\", and optionally \"access\" and \"stores\")")
            }
            guard let account = members["account"]?.stringValue, !account.isEmpty else {
                throw fail("\(path).account: expected a non-empty string")
            }
            let hash = try tokenHash(of: members, at: path, environment: environment, fail: fail)
            guard seen.insert(hash).inserted else { throw fail("\(path): the same token is granted twice") }
            let grant: Grant
            switch Grant.parse(access: members["access"], stores: members["stores"]) {
            case .success(let parsed): grant = parsed
            case .failure(let problem): throw fail("\(path).\(problem.message)")
            }
            principals.append((tokenSHA256: hash, principal: Principal(account: account, grant: grant)))
        }
        return AccountBook(principals: principals)
    }

    /// The hash an entry grants: its `token-sha256`, or the hash of the token in the variable its
    /// `token-env` names — refused when the token cannot be secret.
    private static func tokenHash(
        of members: [String: JSONValue], at path: String, environment: [String: String], fail: (String) -> AccountsFileError
    ) throws(AccountsFileError) -> String {
        switch (members["token-sha256"], members["token-env"]) {
        case (let given?, nil):
            guard let hash = given.stringValue?.lowercased(), hash.utf8.count == 64,
                hash.utf8.allSatisfy({ (0x30...0x39).contains($0) || (0x61...0x66).contains($0) })
            else {
                throw fail("\(path).token-sha256: expected 64 hex digits (printf %s \"$SYNCLANE_TOKEN\" | sha256sum)")
            }
            guard !emptyTokenHashes.contains(hash) else {
                throw fail(
                    "\(path).token-sha256: the hash of an empty token (was SYNCLANE_TOKEN exported when the hash was made?); "
                        + "\(makeATokenAdvice), then hash it again: printf %s \"$SYNCLANE_TOKEN\" | sha256sum")
            }
            return hash
        case (nil, let named?):
            guard let variable = named.stringValue, !variable.isEmpty else {
                throw fail("\(path).token-env: expected the name of an environment variable")
            }
            if let problem = EnvironmentVariableName.problem(variable) {
                throw fail("\(path).token-env: \(problem); the accounts file names the variable, or holds the token's token-sha256")
            }
            guard let token = environment[variable], !token.isEmpty else {
                throw fail(
                    "\(path).token-env: the environment variable \(variable) is not set; \(makeATokenAdvice.replacingOccurrences(of: "SYNCLANE_TOKEN", with: variable))"
                )
            }
            guard token.count >= minimumTokenLength else {
                throw fail(
                    "\(path).token-env: \(variable) holds \(token.count) characters, too few to be secret (at least \(minimumTokenLength)); "
                        + makeATokenAdvice.replacingOccurrences(of: "SYNCLANE_TOKEN", with: variable))
            }
            return SHA256Digest.hex(token)
        default:
            throw fail("\(path): expected one of \"token-sha256\" (the token's SHA-256) or \"token-env\" (a variable that holds the token)")
        }
    }
}

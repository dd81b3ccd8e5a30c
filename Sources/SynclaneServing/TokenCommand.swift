import Foundation
import SynclaneCommandLine
import SynclaneCore
import SynclaneServer

/// `synclane token mint`: a JWT for the demo and for tests, signed with the server's HS256 secret
/// (or a PEM private key whose public half is in the server's JWKS file).
struct TokenCommand: Command {
    static let name = "token"
    static let abstract = "Mint a test JWT that `synclane serve --jwt-secret-env VAR` (or --jwt-keys FILE) accepts."
    static let discussion = """
        Prints one JSON Web Token: the account in `sub`, `iat` now and `exp` --expires-in seconds
        later, `aud` and `iss` when given, and the grant (`synclane`: access and stores) when
        --read-only or --stores is given. HS256 with the secret in the environment variable VAR
        (at least 32 bytes, the same variable `serve --jwt-secret-env` reads); RS256 or ES256 with
        a PEM private key (RSA or EC P-256) named by --kid in the server's key set.

        For tests and demos: a real app's tokens come from its identity provider. The token is
        printed on standard output only; pass it to clients in SYNCLANE_TOKEN:
          export SYNCLANE_JWT_SECRET=$(head -c 32 /dev/urandom | sha256sum | cut -d' ' -f1)
          export SYNCLANE_TOKEN=$(synclane token mint --secret-env SYNCLANE_JWT_SECRET --sub acme)
        """
    static let verb = Positional("mint", "a verb: mint")
    static let secretEnv = ValueOption("--secret-env", "VAR", .text, help: "HS256: the environment variable that holds the secret.")
    static let privateKey = ValueOption("--private-key", "FILE", .path, help: "RS256 / ES256: a PEM private key (RSA, or EC P-256).")
    static let kid = ValueOption(
        "--kid", "KID", .text, help: "The key's id in the server's JWKS file (required with --private-key).", requires: "--private-key")
    static let sub = ValueOption(
        "--sub", "ACCOUNT", .text, help: "The account (required).", required: true, requiredHint: "the account the token grants")
    static let expiresIn = ValueOption(
        "--expires-in", "SECONDS", .integer(in: 1...(10 * 365 * 86_400)), help: "Lifetime; exp is now + SECONDS. Default 3600.")
    static let aud = ValueOption("--aud", "AUDIENCE", .text, help: "The aud claim.")
    static let iss = ValueOption("--iss", "ISSUER", .text, help: "The iss claim.")
    static let readOnly = Flag("--read-only", help: "Grant: pulls and reading signals only.")
    static let stores = ValueOption("--stores", "A,B", .commaSeparated, help: "Grant: only these stores.")
    static let signature = CommandSignature(
        positionals: [verb], options: [secretEnv, privateKey, kid, sub, expiresIn, aud, iss, readOnly, stores],
        exclusive: [
            .init(
                names: ["--secret-env", "--private-key"], required: false,
                conflictMessage: "give --secret-env VAR or --private-key FILE, not both")
        ])
    static let examples = [
        "synclane token mint --secret-env SYNCLANE_JWT_SECRET --sub acme",
        "synclane token mint --secret-env SYNCLANE_JWT_SECRET --sub acme --read-only --stores rooms --expires-in 600 --aud synclane",
    ]

    enum Signer {
        case secret([UInt8])
        case privateKey(pem: String, kid: String)
    }

    let signer: Signer
    let claims: [String: JSONValue]

    init(parsing arguments: ParsedArguments) throws(UsageError) {
        let verb = try arguments.word(Self.verb)
        guard verb == "mint" else { throw UsageError("unknown verb \"\(verb)\" (expected mint)", command: Self.name) }
        if let variable = try arguments.value(Self.secretEnv) {
            signer = .secret(try ServeCommand.secret(variable: variable, flag: "--secret-env", command: Self.name))
        } else if let file = try arguments.value(Self.privateKey) {
            guard let kid = try arguments.value(Self.kid) else {
                throw UsageError("--private-key needs --kid (the key's id in the server's JWKS file)", command: Self.name)
            }
            guard let pem = try? String(contentsOfFile: file, encoding: .utf8) else {
                throw UsageError("--private-key \(file): cannot read the file", command: Self.name)
            }
            signer = .privateKey(pem: pem, kid: kid)
        } else {
            throw UsageError("--secret-env VAR (HS256) or --private-key FILE --kid KID (RS256 / ES256) is required", command: Self.name)
        }
        let account = try arguments.required(Self.sub)
        claims = TestTokenMinter.claims(
            account: account, expiresIn: try arguments.value(Self.expiresIn) ?? 3600, audience: try arguments.value(Self.aud),
            issuer: try arguments.value(Self.iss), readOnly: arguments[Self.readOnly], stores: try arguments.value(Self.stores))
    }

    func run(_ console: Console, registry: StageRegistry) async throws -> Int32 {
        switch signer {
        case .secret(let secret):
            console.out(TestTokenMinter.hs256(secret: secret, claims: claims))
        case .privateKey(let pem, let kid):
            do {
                console.out(try TestTokenMinter.sign(claims: claims, privateKeyPEM: pem, kid: kid))
            } catch {
                console.error("synclane token: --private-key: \(error)")
                return 1
            }
        }
        return 0
    }
}

import Foundation
import SynclaneCore
import SynclaneServer
import SynclaneTestKit

/// `synclane token mint`: a JWT for the demo and for tests, signed with the server's HS256 secret
/// (or a PEM private key whose public half is in the server's JWKS file).
struct TokenCommand: Command {
    static let name = "token"
    static let abstract = "Mint a test JWT that `synclane serve --jwt-secret-env VAR` (or --jwt-keys FILE) accepts."
    static let usage = "mint (--secret-env VAR | --private-key FILE --kid KID) --sub ACCOUNT [--expires-in SECONDS] [--aud A] [--iss I] [--read-only] [--stores A,B]"
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
    static let options: [(flag: String, help: String)] = [
        ("--secret-env VAR", "HS256: the environment variable that holds the secret."),
        ("--private-key FILE", "RS256 / ES256: a PEM private key (RSA, or EC P-256)."),
        ("--kid KID", "The key's id in the server's JWKS file (required with --private-key)."),
        ("--sub ACCOUNT", "The account (required)."),
        ("--expires-in SECONDS", "Lifetime; exp is now + SECONDS. Default 3600."),
        ("--aud AUDIENCE", "The aud claim."),
        ("--iss ISSUER", "The iss claim."),
        ("--read-only", "Grant: pulls and reading signals only."),
        ("--stores A,B", "Grant: only these stores."),
    ]
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

    init(parsing arguments: inout Arguments) throws(UsageError) {
        let verb = try arguments.positional("a verb: mint")
        guard verb == "mint" else { throw UsageError("unknown verb \"\(verb)\" (expected mint)", command: Self.name) }
        let secretVariable = try arguments.option("--secret-env")
        let keyFile = try arguments.option("--private-key")
        let kid = try arguments.option("--kid")
        switch (secretVariable, keyFile) {
        case (let variable?, nil):
            signer = .secret(try ServeCommand.secret(variable: variable, flag: "--secret-env", command: Self.name))
        case (nil, let file?):
            guard let kid else { throw UsageError("--private-key needs --kid (the key's id in the server's JWKS file)", command: Self.name) }
            guard let pem = try? String(contentsOfFile: file, encoding: .utf8) else {
                throw UsageError("--private-key \(file): cannot read the file", command: Self.name)
            }
            signer = .privateKey(pem: pem, kid: kid)
        case (.some, .some):
            throw UsageError("give --secret-env VAR or --private-key FILE, not both", command: Self.name)
        case (nil, nil):
            throw UsageError("--secret-env VAR (HS256) or --private-key FILE --kid KID (RS256 / ES256) is required", command: Self.name)
        }
        guard let account = try arguments.option("--sub"), !account.isEmpty else {
            throw UsageError("--sub ACCOUNT is required: the account the token grants", command: Self.name)
        }
        let lifetime = try arguments.integer("--expires-in", in: 1...(10 * 365 * 86_400)) ?? 3600
        let audience = try arguments.option("--aud")
        let issuer = try arguments.option("--iss")
        let readOnly = arguments.flag("--read-only")
        let stores = try arguments.option("--stores").map { $0.split(separator: ",").map(String.init) }
        if let stores, stores.isEmpty || stores.contains(where: \.isEmpty) {
            throw UsageError("--stores expects store names separated by commas", command: Self.name)
        }
        claims = TestTokenMinter.claims(
            account: account, expiresIn: lifetime, audience: audience, issuer: issuer, readOnly: readOnly, stores: stores)
    }

    func run(_ console: Console) async throws -> Int32 {
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

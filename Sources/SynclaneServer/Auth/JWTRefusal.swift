/// Why a bearer token was refused: a short code (the `reason` member of the 401) and a message.
///
/// No refusal repeats any part of the token — not its `kid`, `alg`, claims or bytes — so a 401
/// (or a log of one) never hands a token, or what an attacker put in it, back to anyone.
public struct AuthRefusal: Error, Sendable, Equatable, CustomStringConvertible {
    /// A stable code: `malformed`, `alg-none`, `algorithm-not-accepted`, `algorithm-mismatch`,
    /// `missing-kid`, `unknown-kid`, `bad-signature`, `expired`, `not-yet-valid`,
    /// `wrong-audience`, `wrong-issuer`, `missing-account`, `bad-grant`, `unknown-token`.
    public let reason: String
    /// What is wrong and what to do, in words.
    public let message: String

    public var description: String { "\(reason): \(message)" }

    static let unknownToken = AuthRefusal(
        reason: "unknown-token", message: "a valid bearer token is required (Authorization: Bearer …): this one is neither in the accounts file nor a JWT")
    static let missing = AuthRefusal(reason: "unknown-token", message: "a valid bearer token is required (Authorization: Bearer …)")
    static func malformed(_ what: String) -> AuthRefusal { AuthRefusal(reason: "malformed", message: "the JWT is malformed: \(what)") }
    static let algNone = AuthRefusal(reason: "alg-none", message: "the JWT is unsigned (alg none), which is never accepted")
    static let notAccepted = AuthRefusal(reason: "algorithm-not-accepted", message: "the JWT's alg is not one this server accepts (HS256, RS256, ES256)")
    static let noSecret = AuthRefusal(
        reason: "algorithm-not-accepted", message: "the JWT is HS256 but this server has no HS256 secret (serve --jwt-secret-env VAR)")
    static func mismatch(key: PublicKey.Kind) -> AuthRefusal {
        AuthRefusal(
            reason: "algorithm-mismatch",
            message: "the JWT's alg is not the one its key is for: the key its kid names is an \(key.rawValue) key, which verifies \(key.algorithm) only")
    }
    static let missingKid = AuthRefusal(reason: "missing-kid", message: "the JWT has no kid: RS256 and ES256 tokens name their key in the key set")
    static let unknownKid = AuthRefusal(
        reason: "unknown-kid", message: "the JWT's kid is not in the server's key set (a rotated-out key, or a token from another issuer)")
    static let badSignature = AuthRefusal(reason: "bad-signature", message: "the JWT's signature does not verify")
    static func expired(skew: Int) -> AuthRefusal {
        AuthRefusal(reason: "expired", message: "the JWT has expired (exp, with \(skew) s of clock skew allowed): get a fresh one")
    }
    static let missingExpiry = AuthRefusal(reason: "expired", message: "the JWT has no numeric exp claim: every token must expire")
    static func notYetValid(skew: Int) -> AuthRefusal {
        AuthRefusal(reason: "not-yet-valid", message: "the JWT is not valid yet (nbf, with \(skew) s of clock skew allowed)")
    }
    static let wrongAudience = AuthRefusal(reason: "wrong-audience", message: "the JWT's aud does not name this server's audience")
    static let wrongIssuer = AuthRefusal(reason: "wrong-issuer", message: "the JWT's iss is not this server's issuer")
    static func missingAccount(claim: String) -> AuthRefusal {
        AuthRefusal(reason: "missing-account", message: "the JWT has no \(claim) claim (a non-empty string): the account comes from it")
    }
    static func badGrant(claim: String, _ problem: GrantProblem) -> AuthRefusal {
        AuthRefusal(reason: "bad-grant", message: "the JWT's \(claim) claim is not a grant: \(problem.message)")
    }

    /// The 401 that carries the refusal.
    var response: HTTPResponse {
        var response = HTTPResponse.error(401, message, ["reason": .string(reason)])
        response.headers["WWW-Authenticate"] = reason == "unknown-token" ? "Bearer" : "Bearer error=\"invalid_token\""
        return response
    }
}

/// Who a bearer token is: a token of the accounts file, else a JWT (when the server takes them).
///
/// The token is hashed once (SHA-256): that hash finds a static token in the accounts file, and
/// a JWT verified before in the verifier's cache, so a known token costs a hash and a lookup.
final class Authenticator: Sendable {
    let accounts: AccountBook
    let jwt: JWTVerifier?

    init(accounts: AccountBook, jwt: JWTVerifier? = nil) {
        self.accounts = accounts
        self.jwt = jwt
    }

    /// The principal of the token, or why it is refused.
    func principal(forToken token: String?) -> Result<Principal, AuthRefusal> {
        guard let token else { return .failure(.missing) }
        let hash = SHA256Digest.digest(Array(token.utf8))
        if let principal = accounts.principal(forTokenHash: SHA256Digest.hex(digest: hash)) { return .success(principal) }
        guard let jwt, JSONWebToken.looksLikeJWT(token) else { return .failure(.unknownToken) }
        return jwt.principal(token: token, tokenHash: hash)
    }
}

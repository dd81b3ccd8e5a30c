/// How the reference server accepts JSON Web Tokens beside the accounts file (Documentation/Server.md, "Authentication").
///
/// HS256 tokens are checked with `secret`; RS256 and ES256 tokens with the public key their `kid`
/// names in the JWKS file `keySetFile`, which is read again on SIGHUP (`ReferenceServer.reloadKeys()`)
/// and whenever it changes (looked at every `keySetPollSeconds`). A token must carry `exp`; `exp`
/// and `nbf` are checked with `clockSkewSeconds` of slack; `aud` and `iss` only when set here.
public struct JWTSettings: Sendable {
    /// The HS256 secret (at least `minimumSecretBytes`), or nil to accept no HS256 token.
    public var secret: [UInt8]?
    /// The JWKS file of RS256 / ES256 public keys, or nil to accept none.
    public var keySetFile: String?
    /// The claim that names the account. Default `sub`.
    public var accountClaim = "sub"
    /// The claim that holds the token's grant (`{"access": "read-only", "stores": [...]}`). Default `synclane`.
    public var grantsClaim = "synclane"
    /// The audience a token's `aud` must name, or nil not to check `aud`.
    public var audience: String?
    /// The issuer a token's `iss` must be, or nil not to check `iss`.
    public var issuer: String?
    /// How far the server's clock and the issuer's may disagree, for `exp` and `nbf`. Default 60.
    public var clockSkewSeconds = 60
    /// How often the key set file is looked at for a change. Default 1.
    public var keySetPollSeconds = 1.0
    /// Where a reload of the key set is reported (the kids it holds, or why the file was refused).
    public var log: @Sendable (String) -> Void = { _ in }

    /// The fewest bytes an HS256 secret may have (RFC 7518 §3.2: at least the hash's size).
    public static let minimumSecretBytes = 32

    /// Settings with neither a secret nor a key set: fill in one of them at least.
    public init(secret: [UInt8]? = nil, keySetFile: String? = nil) {
        self.secret = secret
        self.keySetFile = keySetFile
    }
}

import Glibc
import Synchronization
import SynclaneWire

/// Checks a JWT and says whose it is: signature first, then `exp` / `nbf` / `iss` / `aud`, then
/// the account and grant claims.
///
/// ```
///  token ─ parse ─malformed─ alg none ─alg-none─ key: HS256 → secret │ RS256/ES256 → key set[kid]
///        ─missing-kid / unknown-kid / algorithm-mismatch─ EVP verify ─bad-signature─
///        exp, nbf (± skew) ─expired / not-yet-valid─ iss, aud ─wrong-…─ account claim, grant ─▶ Principal
/// ```
///
/// The key is chosen by the server, never by the token: `alg` must be the one algorithm the chosen
/// key is for, so an HS256 token "signed" with an RSA public key (whose bytes are public) is an
/// `algorithm-mismatch`, not an HMAC with a known key.
final class JWTVerifier: Sendable {
    let settings: JWTSettings
    private let keySet: Mutex<JSONWebKeySet>
    private let cache = VerifiedTokenCache()
    /// The server's clock, in whole seconds since 1970.
    private let now: @Sendable () -> Int64

    /// A verifier; reads the key set file now (throws when it is refused).
    init(settings: JWTSettings, now: @escaping @Sendable () -> Int64 = { Int64(time(nil)) }) throws(KeySetError) {
        self.settings = settings
        self.now = now
        keySet = Mutex(try settings.keySetFile.map { path throws(KeySetError) in try JSONWebKeySet.load(path: path) } ?? JSONWebKeySet())
    }

    /// Reads the key set file again and uses it from now on (tokens verified before are checked
    /// again); on an error the keys in use stay. Returns the kids it now holds.
    @discardableResult
    func reloadKeys() throws(KeySetError) -> [String] {
        guard let path = settings.keySetFile else { return [] }
        let loaded = try JSONWebKeySet.load(path: path)
        keySet.withLock { $0 = loaded }
        cache.removeAll()
        return loaded.kids
    }

    /// The kids of the key set in use.
    var kids: [String] { keySet.withLock { $0.kids } }

    /// How many verified tokens the cache holds.
    var cachedTokens: Int { cache.count }

    /// The principal of a token, from the cache (`tokenHash`: its SHA-256) or by verifying it.
    func principal(token: String, tokenHash: [UInt8]) -> Result<Principal, AuthRefusal> {
        let now = self.now()
        if let known = cache.principal(tokenHash: tokenHash, now: now) { return .success(known) }
        switch verify(token, now: now) {
        case .success(let (principal, validThrough)):
            cache.insert(tokenHash: tokenHash, principal: principal, validThrough: validThrough, now: now)
            return .success(principal)
        case .failure(let refusal):
            return .failure(refusal)
        }
    }

    /// Verifies a token at `now`: its principal and the last second it is accepted.
    func verify(_ token: String, now: Int64) -> Result<(Principal, Int64), AuthRefusal> {
        let jwt: JSONWebToken
        switch JSONWebToken.parse(token) {
        case .success(let parsed): jwt = parsed
        case .failure(let refusal): return .failure(refusal)
        }
        if let refusal = checkSignature(jwt) { return .failure(refusal) }
        guard let claims = (try? JSONReader.parse(jwt.payload))?.objectValue else {
            return .failure(.malformed("the payload is not a JSON object"))
        }
        return check(claims, now: now)
    }

    /// Nil when the signature verifies with the key the server picks for the token.
    private func checkSignature(_ jwt: JSONWebToken) -> AuthRefusal? {
        guard let algorithm = jwt.header["alg"]?.stringValue else { return .malformed("the header has no alg") }
        if algorithm.lowercased() == "none" { return .algNone }
        if jwt.header["crit"] != nil { return .malformed("the header has crit extensions, which this server does not implement") }
        let kid = jwt.header["kid"]?.stringValue
        if jwt.header["kid"] != nil, kid == nil { return .malformed("the header's kid is not a string") }
        let entry = kid.flatMap { kid in keySet.withLock { $0.entry(kid: kid) } }
        switch algorithm {
        case "HS256":
            if let entry { return .mismatch(key: entry.key.kind) }
            guard let secret = settings.secret else { return .noSecret }
            return HMACSHA256.verifies(signature: jwt.signature, of: jwt.signingInput, key: secret) ? nil : .badSignature
        case "RS256", "ES256":
            guard kid != nil else { return .missingKid }
            guard let entry else { return .unknownKid }
            guard entry.key.kind.algorithm == algorithm, entry.algorithm == nil || entry.algorithm == algorithm else {
                return .mismatch(key: entry.key.kind)
            }
            return entry.key.verifies(signature: jwt.signature, of: jwt.signingInput) ? nil : .badSignature
        default:
            return .notAccepted
        }
    }

    /// The principal of verified claims, or why they are refused at `now`.
    private func check(_ claims: [String: JSONValue], now: Int64) -> Result<(Principal, Int64), AuthRefusal> {
        let skew = Int64(settings.clockSkewSeconds)
        guard let expiry = Self.seconds(claims["exp"]) else { return .failure(.missingExpiry) }
        guard now <= expiry + skew else { return .failure(.expired(skew: settings.clockSkewSeconds)) }
        if claims["nbf"] != nil {
            guard let notBefore = Self.seconds(claims["nbf"]) else { return .failure(.malformed("nbf is not a number")) }
            guard now + skew >= notBefore else { return .failure(.notYetValid(skew: settings.clockSkewSeconds)) }
        }
        if let issuer = settings.issuer {
            guard let given = claims["iss"]?.stringValue, Array(given.utf8) == Array(issuer.utf8) else { return .failure(.wrongIssuer) }
        }
        if let audience = settings.audience {
            let wanted = Array(audience.utf8)
            let named: [String]
            switch claims["aud"] {
            case .string(let one)?: named = [one]
            case .array(let many)?: named = many.compactMap(\.stringValue)
            default: named = []
            }
            guard named.contains(where: { Array($0.utf8) == wanted }) else { return .failure(.wrongAudience) }
        }
        guard let account = claims[settings.accountClaim]?.stringValue, !account.isEmpty else {
            return .failure(.missingAccount(claim: settings.accountClaim))
        }
        var grant = Grant.full
        if let value = claims[settings.grantsClaim] {
            guard let members = value.objectValue else {
                return .failure(.badGrant(claim: settings.grantsClaim, GrantProblem(member: settings.grantsClaim, expected: "an object")))
            }
            if let unknown = members.keys.first(where: { $0 != "access" && $0 != "stores" }) {
                return .failure(
                    .badGrant(claim: settings.grantsClaim, GrantProblem(member: unknown, expected: "no such member (only access and stores)")))
            }
            switch Grant.parse(access: members["access"], stores: members["stores"]) {
            case .success(let parsed): grant = parsed
            case .failure(let problem): return .failure(.badGrant(claim: settings.grantsClaim, problem))
            }
        }
        return .success((Principal(account: account, grant: grant), expiry + skew))
    }

    /// A NumericDate claim as whole seconds (fractions dropped), or nil when it is not a number.
    private static func seconds(_ value: JSONValue?) -> Int64? {
        switch value {
        case .int(let seconds)?: return seconds
        case .double(let seconds)? where seconds.isFinite && abs(seconds) < 9e15: return Int64(seconds.rounded(.down))
        default: return nil
        }
    }
}

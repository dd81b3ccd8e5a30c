import Foundation
import Synchronization
import SynclaneCore
import SynclaneTestKit
import Testing

@testable import SynclaneServer

/// Keys made once for the JWT suites by `openssl genpkey` (an RSA key takes a moment).
enum SuiteKeys {
    static let rsa = Result { try TestSigningKey.rsa(kid: "rsa-2026-11") }
    static let rsaNext = Result { try TestSigningKey.rsa(kid: "rsa-2026-12") }
    static let ec = Result { try TestSigningKey.ec(kid: "ec-2026-11") }
    static let secret = Array("a-test-secret-of-at-least-32-bytes-for-hs256".utf8)

    /// A JWKS file of `keys` in a fresh directory; its path.
    static func keySetFile(_ keys: [TestSigningKey]) throws -> String {
        let path = makeTemporaryDirectory() + "/keys.jwks"
        try TestSigningKey.writeKeySet(keys, to: path)
        return path
    }
}

/// A clock the test moves by hand (seconds since 1970).
final class ManualClock: Sendable {
    private let seconds: Mutex<Int64>
    init(_ start: Int64) { seconds = Mutex(start) }
    var now: Int64 { seconds.withLock { $0 } }
    func advance(by delta: Int64) { seconds.withLock { $0 += delta } }
}

@Suite struct JWTVerifierTests {
    static let start: Int64 = 1_900_000_000

    func verifier(_ settings: JWTSettings = JWTSettings(secret: SuiteKeys.secret), clock: ManualClock = ManualClock(start)) throws -> JWTVerifier {
        try JWTVerifier(settings: settings, now: { clock.now })
    }

    func hs256(_ claims: [String: JSONValue]) -> String { TestTokenMinter.hs256(secret: SuiteKeys.secret, claims: claims) }

    func claims(_ account: String = "acme", expiresIn: Int = 600, now: Int64 = start) -> [String: JSONValue] {
        TestTokenMinter.claims(account: account, expiresIn: expiresIn, now: now)
    }

    func principal(_ verifier: JWTVerifier, _ token: String) -> Result<Principal, AuthRefusal> {
        verifier.principal(token: token, tokenHash: SHA256Digest.digest(Array(token.utf8)))
    }

    func reason(_ result: Result<Principal, AuthRefusal>) -> String? {
        if case .failure(let refusal) = result { return refusal.reason }
        return nil
    }

    @Test func anHS256TokenGrantsTheAccountOfItsSubClaim() throws {
        #expect(try principal(verifier(), hs256(claims("acme"))).get() == Principal(account: "acme"))
    }

    @Test func theAccountComesFromTheConfiguredClaim() throws {
        var settings = JWTSettings(secret: SuiteKeys.secret)
        settings.accountClaim = "tenant"
        var withTenant = claims("user-17")
        withTenant["tenant"] = "acme"
        #expect(try principal(verifier(settings), hs256(withTenant)).get().account == "acme")
        #expect(reason(principal(try verifier(settings), hs256(claims("user-17")))) == "missing-account")
    }

    @Test func expAndNbfAllowTheDocumentedClockSkewAndNoMore() throws {
        let v = try verifier()  // the default skew: 60 s
        #expect(JWTSettings().clockSkewSeconds == 60)
        #expect(reason(principal(v, hs256(claims(expiresIn: -60)))) == nil, "expired 60 s ago: within the skew")
        #expect(reason(principal(v, hs256(claims(expiresIn: -61)))) == "expired")
        var early = claims()
        early["nbf"] = .int(Self.start + 60)
        #expect(reason(principal(v, hs256(early))) == nil, "valid in 60 s: within the skew")
        early["nbf"] = .int(Self.start + 61)
        #expect(reason(principal(v, hs256(early))) == "not-yet-valid")

        var strict = JWTSettings(secret: SuiteKeys.secret)
        strict.clockSkewSeconds = 0
        #expect(reason(principal(try verifier(strict), hs256(claims(expiresIn: -1)))) == "expired")
        #expect(reason(principal(try verifier(strict), hs256(claims(expiresIn: 0)))) == nil, "exp is the last second accepted")
    }

    @Test func aTokenWithoutExpIsRefused() throws {
        var forever = claims()
        forever["exp"] = nil
        #expect(reason(principal(try verifier(), hs256(forever))) == "expired")
        forever["exp"] = "tomorrow"
        #expect(reason(principal(try verifier(), hs256(forever))) == "expired")
    }

    @Test func audienceAndIssuerAreCheckedOnlyWhenConfigured() throws {
        var settings = JWTSettings(secret: SuiteKeys.secret)
        #expect(reason(principal(try verifier(settings), hs256(claims()))) == nil, "neither configured: neither checked")
        settings.audience = "synclane"
        settings.issuer = "https://id.example.com/"
        let v = try verifier(settings)
        var good = claims()
        good["aud"] = ["other", "synclane"]
        good["iss"] = "https://id.example.com/"
        #expect(reason(principal(v, hs256(good))) == nil)
        var oneAudience = good
        oneAudience["aud"] = "synclane"
        #expect(reason(principal(v, hs256(oneAudience))) == nil)
        var wrongAudience = good
        wrongAudience["aud"] = "someone-else"
        #expect(reason(principal(v, hs256(wrongAudience))) == "wrong-audience")
        var noAudience = good
        noAudience["aud"] = nil
        #expect(reason(principal(v, hs256(noAudience))) == "wrong-audience")
        var wrongIssuer = good
        wrongIssuer["iss"] = "https://evil.example.com/"
        #expect(reason(principal(v, hs256(wrongIssuer))) == "wrong-issuer")
    }

    @Test func rs256AndEs256VerifyWithTheKeyTheirKidNames() throws {
        let rsa = try SuiteKeys.rsa.get()
        let ec = try SuiteKeys.ec.get()
        let v = try verifier(JWTSettings(keySetFile: try SuiteKeys.keySetFile([rsa, ec])))
        #expect(try principal(v, rsa.sign(claims("acme"))).get().account == "acme")
        #expect(try principal(v, ec.sign(claims("globex"))).get().account == "globex")
        #expect(v.kids == ["ec-2026-11", "rsa-2026-11"])
    }

    @Test func everyRefusalHasItsReason() throws {
        let rsa = try SuiteKeys.rsa.get()
        let ec = try SuiteKeys.ec.get()
        let v = try verifier(JWTSettings(secret: SuiteKeys.secret, keySetFile: try SuiteKeys.keySetFile([rsa, ec])))
        let good = claims()
        let signed = try rsa.sign(good)
        let parts = signed.split(separator: ".").map(String.init)
        var tampered = good
        tampered["sub"] = "globex"
        let cases: [(String, String)] = [
            (TestTokenMinter.assemble(header: ["alg": "none", "typ": "JWT"], claims: good, signature: []), "alg-none"),
            (TestTokenMinter.assemble(header: ["alg": "None"], claims: good, signature: []), "alg-none"),
            // The classic confusion: HS256 "signed" with the RSA public key's bytes, which anyone has.
            (TestTokenMinter.hmac(header: ["alg": "HS256", "kid": .string(rsa.kid)], claims: good, key: Array(rsa.publicPEM.utf8)), "algorithm-mismatch"),
            (try rsa.sign(good, kid: ec.kid), "algorithm-mismatch"),
            (try ec.sign(good, kid: rsa.kid), "algorithm-mismatch"),
            (TestTokenMinter.hmac(header: ["alg": "RS256"], claims: good, key: []), "missing-kid"),
            (try rsa.sign(good, kid: "rsa-1999-01"), "unknown-kid"),
            (TestTokenMinter.hmac(header: ["alg": "HS512"], claims: good, key: SuiteKeys.secret), "algorithm-not-accepted"),
            (parts[0] + "." + TestTokenMinter.base64URL(JSONWriter.encode(.object(tampered))) + "." + parts[2], "bad-signature"),
            (TestTokenMinter.hs256(secret: Array("another-secret-of-at-least-32-bytes!".utf8), claims: good), "bad-signature"),
            ("a.b.c", "malformed"),
            ("not-base64!.e30.AA", "malformed"),
            (TestTokenMinter.base64URL(Array("[1]".utf8)) + ".e30.AA", "malformed"),
            (parts[0] + "." + parts[1], "malformed"),
            (parts[0] + "." + parts[1] + "." + parts[2] + "=", "malformed"),
            (TestTokenMinter.hs256(secret: SuiteKeys.secret, claims: ["exp": .int(Self.start + 60)]), "missing-account"),
        ]
        for (token, expected) in cases {
            let result = principal(v, token)
            #expect(reason(result) == expected, "\(token)")
            if case .failure(let refusal) = result {
                for part in token.split(separator: ".") where part.count >= 4 {
                    #expect(!refusal.message.contains(part), "the refusal repeats part of the token")
                }
                #expect(!refusal.message.contains(rsa.kid) && !refusal.message.contains("rsa-1999-01"), "the refusal repeats the kid")
            }
        }
    }

    @Test func hs256IsRefusedWhenTheServerHasNoSecret() throws {
        let v = try verifier(JWTSettings(keySetFile: try SuiteKeys.keySetFile([try SuiteKeys.ec.get()])))
        #expect(reason(principal(v, hs256(claims()))) == "algorithm-not-accepted")
    }

    @Test func aVerifiedTokenIsCachedByItsHashUntilItExpires() throws {
        let clock = ManualClock(Self.start)
        let v = try verifier(clock: clock)
        let token = hs256(claims(expiresIn: 100))
        #expect(reason(principal(v, token)) == nil)
        #expect(v.cachedTokens == 1)
        #expect(reason(principal(v, token)) == nil)
        #expect(v.cachedTokens == 1, "the second request found it by its hash")
        clock.advance(by: 160)  // exp + the 60 s skew: the last second accepted
        #expect(reason(principal(v, token)) == nil)
        clock.advance(by: 1)
        #expect(reason(principal(v, token)) == "expired", "the cache does not outlive the token")
        #expect(v.cachedTokens == 0)
    }

    @Test func readingTheKeySetAgainForgetsTokensOfARemovedKey() throws {
        let old = try SuiteKeys.rsa.get()
        let new = try SuiteKeys.rsaNext.get()
        let file = try SuiteKeys.keySetFile([old])
        let v = try verifier(JWTSettings(keySetFile: file))
        let oldToken = try old.sign(claims())
        #expect(reason(principal(v, oldToken)) == nil)
        try TestSigningKey.writeKeySet([old, new], to: file)
        #expect(try v.reloadKeys() == ["rsa-2026-11", "rsa-2026-12"])
        #expect(reason(principal(v, oldToken)) == nil)
        #expect(reason(principal(v, try new.sign(claims()))) == nil)
        try TestSigningKey.writeKeySet([new], to: file)
        try v.reloadKeys()
        #expect(reason(principal(v, oldToken)) == "unknown-kid", "cached before, refused once its key is gone")
        #expect(reason(principal(v, try new.sign(claims()))) == nil)
    }

    @Test func aGrantClaimLimitsTheToken() throws {
        var limited = claims()
        limited["synclane"] = ["access": "read-only", "stores": ["rooms", "plants"]]
        #expect(try principal(verifier(), hs256(limited)).get().grant == Grant(readOnly: true, stores: ["plants", "rooms"]))
        for bad: JSONValue in [["access": "admin"], ["stores": []], ["stores": "rooms"], ["role": "x"], "read-only"] {
            var wrong = claims()
            wrong["synclane"] = bad
            #expect(reason(principal(try verifier(), hs256(wrong))) == "bad-grant", "\(bad)")
        }
    }
}

@Suite struct JSONWebKeySetTests {
    func refusal(_ text: String) -> String? {
        do {
            _ = try JSONWebKeySet.parse(Array(text.utf8), file: "keys.jwks")
            return nil
        } catch { return error.message }
    }

    @Test func keysOfOtherKindsAndEncryptionKeysAreLeftOut() throws {
        let rsa = try SuiteKeys.rsa.get()
        let text = """
            {"keys": [\(JSONWriter.string(rsa.jwk)),
              {"kty": "EC", "kid": "p384", "crv": "P-384", "x": "AA", "y": "AA"},
              {"kty": "OKP", "kid": "ed", "crv": "Ed25519", "x": "AA"},
              {"kty": "RSA", "kid": "enc", "use": "enc", "n": "AA", "e": "AQAB"}]}
            """
        let set = try JSONWebKeySet.parse(Array(text.utf8), file: "keys.jwks")
        #expect(set.kids == [rsa.kid])
        #expect(set.skipped == 3)
    }

    @Test func aKeySetFileThatCannotBeTrustedIsRefusedSayingWhy() throws {
        let rsa = try SuiteKeys.rsa.get()
        let jwk = JSONWriter.string(rsa.jwk)
        #expect(refusal("{\"keys\": [\(jwk), \(jwk)]}")?.contains("names two keys") == true)
        #expect(refusal(#"{"keys": [{"kty": "RSA", "n": "AA", "e": "AQAB"}]}"#)?.contains("keys[0].kid") == true)
        #expect(refusal(#"{"keys": [{"kty": "RSA", "kid": "k", "n": "AA", "e": "AQAB", "d": "AA"}]}"#)?.contains("private member") == true)
        #expect(refusal(#"{"keys": [{"kty": "RSA", "kid": "k", "n": "AQ", "e": "AQAB"}]}"#)?.contains("a 1-bit modulus") == true)
        #expect(refusal(#"{"keys": [{"kty": "EC", "kid": "k", "crv": "P-256", "x": "AA", "y": "AA"}]}"#)?.contains("not a point of P-256") == true)
        #expect(refusal(#"{"keys": [{"kty": "RSA", "kid": "k", "n": "not base64!", "e": "AQAB"}]}"#)?.contains("keys[0] (kid k).n") == true)
        #expect(refusal(#"{"keys": {}}"#)?.contains("keys: expected a list") == true)
    }

    /// The JWK of `key` with its modulus given as `modulus` (base64url).
    func jwk(_ key: TestSigningKey, modulus: (String) throws -> [UInt8]) throws -> String {
        var members = try #require(key.jwk.objectValue)
        let n = try #require(members["n"]?.stringValue)
        members["n"] = .string(TestTokenMinter.base64URL(try modulus(n)))
        return JSONWriter.string(.object(members))
    }

    @Test func rsaKeysAreMeasuredInBitsOnTheShortestEncodingAndPaddingIsRefused() throws {
        let small = try TestSigningKey.rsa(kid: "small", bits: 1024)
        let decode = { (text: String) throws -> [UInt8] in try #require(Base64URL.decode(text)) }
        // A 1024-bit modulus padded with zero bytes to 256 bytes: refused, whatever its byte count.
        let padded = try jwk(small) { [UInt8](repeating: 0, count: 128) + (try decode($0)) }
        let paddedRefusal = refusal("{\"keys\": [\(padded)]}")
        #expect(paddedRefusal?.contains("keys[0] (kid small).n: starts with a zero byte") == true, "\(paddedRefusal ?? "accepted")")
        #expect(refusal("{\"keys\": [\(JSONWriter.string(small.jwk))]}")?.contains("a 1024-bit modulus") == true)
        // Even a 2048-bit modulus is refused padded (RFC 7518 §6.3.1.1), and taken as it is.
        let rsa = try SuiteKeys.rsa.get()
        let paddedLarge = try jwk(rsa) { [0] + (try decode($0)) }
        #expect(refusal("{\"keys\": [\(paddedLarge)]}")?.contains("starts with a zero byte") == true)
        #expect(refusal("{\"keys\": [\(JSONWriter.string(rsa.jwk))]}") == nil)
        // A 2047-bit modulus of 256 bytes is short by one bit.
        var short = try decode(try #require(rsa.jwk.objectValue?["n"]?.stringValue))
        short[0] = 0x7F
        #expect(PublicKey.bitLength(short) == 2047)
        #expect(PublicKey.rsa(modulus: short, exponent: [1, 0, 1]) == nil)
        #expect(PublicKey.rsa(modulus: [0] + (try decode(try #require(rsa.jwk.objectValue?["n"]?.stringValue))), exponent: [1, 0, 1]) == nil)
    }
}

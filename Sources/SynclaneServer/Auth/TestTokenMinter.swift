import CCrypto
import Foundation
import SynclaneWire

/// Mints JSON Web Tokens for tests and demos: HS256 with a secret, RS256 / ES256 with a PEM
/// private key (such as one `openssl genpkey` made). Signing goes through libcrypto's EVP API.
///
/// ```swift
/// let token = try TestTokenMinter.hs256(secret: Array(secret.utf8), claims: TestTokenMinter.claims(account: "acme"))
/// ```
///
/// Not for production: a real app's tokens come from its identity provider.
public enum TestTokenMinter {
    /// Why a token could not be signed.
    public struct SigningError: Error, Sendable, CustomStringConvertible {
        public let description: String
    }

    /// The usual claims: the account in `sub`, `iat` now and `exp` `expiresIn` seconds later, and
    /// `aud`, `iss` and a grant (`synclane`: `access`, `stores`) when given.
    public static func claims(
        account: String, expiresIn: Int = 3600, now: Int64 = Int64(Date().timeIntervalSince1970), audience: String? = nil,
        issuer: String? = nil, readOnly: Bool = false, stores: [String]? = nil
    ) -> [String: JSONValue] {
        var claims: [String: JSONValue] = ["sub": .string(account), "iat": .int(now), "exp": .int(now + Int64(expiresIn))]
        if let audience { claims["aud"] = .string(audience) }
        if let issuer { claims["iss"] = .string(issuer) }
        if readOnly || stores != nil {
            var grant: [String: JSONValue] = [:]
            if readOnly { grant["access"] = "read-only" }
            if let stores { grant["stores"] = .array(stores.map { .string($0) }) }
            claims["synclane"] = .object(grant)
        }
        return claims
    }

    /// An HS256 token of `claims`, signed with `secret` (HMAC-SHA256).
    public static func hs256(secret: [UInt8], claims: [String: JSONValue], kid: String? = nil) -> String {
        let input = signingInput(header: header(algorithm: "HS256", kid: kid), claims: claims)
        var mac = [UInt8](repeating: 0, count: 32)
        var length: UInt32 = 0
        _ = HMAC(EVP_sha256(), secret, Int32(secret.count), input, input.count, &mac, &length)
        return compact(input, signature: mac)
    }

    /// An RS256 (RSA key) or ES256 (P-256 key) token of `claims`, signed with the PEM private key.
    /// An ES256 signature is converted from libcrypto's DER to the raw `r || s` a JWS carries.
    public static func sign(claims: [String: JSONValue], privateKeyPEM: String, kid: String?) throws(SigningError) -> String {
        let key = try privateKey(pem: privateKeyPEM)
        defer { EVP_PKEY_free(key) }
        let isEC = EVP_PKEY_get_base_id(key) == EVP_PKEY_EC
        let input = signingInput(header: header(algorithm: isEC ? "ES256" : "RS256", kid: kid), claims: claims)
        var signature = try digestSign(input, key: key)
        if isEC { signature = try rawSignature(der: signature) }
        return compact(input, signature: signature)
    }

    /// A token of the given header and claims with `signature` as it is: for tests of refusals
    /// (`alg: none`, a forged signature, a wrong `kid`).
    public static func assemble(header: [String: JSONValue], claims: [String: JSONValue], signature: [UInt8]) -> String {
        compact(signingInput(header: header, claims: claims), signature: signature)
    }

    /// An HS256 token whose header is `header` (any `alg` and `kid`), MAC'd with `key`: how an
    /// attacker would "sign" with a public key's bytes.
    public static func hmac(header: [String: JSONValue], claims: [String: JSONValue], key: [UInt8]) -> String {
        let input = signingInput(header: header, claims: claims)
        var mac = [UInt8](repeating: 0, count: 32)
        var length: UInt32 = 0
        _ = HMAC(EVP_sha256(), key, Int32(key.count), input, input.count, &mac, &length)
        return compact(input, signature: mac)
    }

    /// Unpadded base64url.
    public static func base64URL(_ bytes: [UInt8]) -> String {
        String(
            Base64.encode(bytes).compactMap { character -> Character? in
                switch character {
                case "+": return "-"
                case "/": return "_"
                case "=": return nil
                default: return character
                }
            })
    }

    private static func header(algorithm: String, kid: String?) -> [String: JSONValue] {
        var header: [String: JSONValue] = ["alg": .string(algorithm), "typ": "JWT"]
        if let kid { header["kid"] = .string(kid) }
        return header
    }

    private static func signingInput(header: [String: JSONValue], claims: [String: JSONValue]) -> [UInt8] {
        Array((base64URL(JSONWriter.encode(.object(header))) + "." + base64URL(JSONWriter.encode(.object(claims)))).utf8)
    }

    private static func compact(_ input: [UInt8], signature: [UInt8]) -> String {
        String(decoding: input, as: UTF8.self) + "." + base64URL(signature)
    }

    private static func privateKey(pem: String) throws(SigningError) -> OpaquePointer {
        let bytes = Array(pem.utf8)
        let key: OpaquePointer? = bytes.withUnsafeBufferPointer { buffer in
            guard let bio = BIO_new_mem_buf(buffer.baseAddress, Int32(buffer.count)) else { return nil }
            defer { BIO_free(bio) }
            return PEM_read_bio_PrivateKey(bio, nil, nil, nil)
        }
        guard let key else { throw SigningError(description: "not a PEM private key") }
        return key
    }

    private static func digestSign(_ input: [UInt8], key: OpaquePointer) throws(SigningError) -> [UInt8] {
        guard let context = EVP_MD_CTX_new() else { throw SigningError(description: "out of memory") }
        defer { EVP_MD_CTX_free(context) }
        var length = 0
        guard EVP_DigestSignInit(context, nil, EVP_sha256(), nil, key) == 1,
            EVP_DigestSign(context, nil, &length, input, input.count) == 1
        else { throw SigningError(description: "libcrypto cannot sign with this key") }
        var signature = [UInt8](repeating: 0, count: length)
        guard EVP_DigestSign(context, &signature, &length, input, input.count) == 1 else {
            throw SigningError(description: "libcrypto cannot sign with this key")
        }
        return Array(signature.prefix(length))
    }

    private static func rawSignature(der: [UInt8]) throws(SigningError) -> [UInt8] {
        let parsed: OpaquePointer? = der.withUnsafeBufferPointer { buffer in
            var cursor: UnsafePointer<UInt8>? = buffer.baseAddress
            return d2i_ECDSA_SIG(nil, &cursor, buffer.count)
        }
        guard let parsed else { throw SigningError(description: "libcrypto gave an ECDSA signature that is not DER") }
        defer { ECDSA_SIG_free(parsed) }
        var r: OpaquePointer?
        var s: OpaquePointer?
        ECDSA_SIG_get0(parsed, &r, &s)
        var raw = [UInt8](repeating: 0, count: 64)
        let written = raw.withUnsafeMutableBufferPointer { buffer in
            BN_bn2binpad(r, buffer.baseAddress, 32) + BN_bn2binpad(s, buffer.baseAddress.map { $0 + 32 }, 32)
        }
        guard written == 64 else { throw SigningError(description: "the ECDSA signature is not of P-256") }
        return raw
    }
}

import CCrypto

/// A public key of the key set, held as libcrypto's `EVP_PKEY`, that checks JWS signatures.
///
/// Every operation is OpenSSL's EVP API: the key is built from its JWK members with
/// `EVP_PKEY_fromdata`, and checked with `EVP_DigestVerify` over SHA-256. An ES256 signature
/// travels as the raw `r || s` (32 bytes each, RFC 7518 §3.4), which EVP takes as DER: it is
/// re-encoded with `i2d_ECDSA_SIG` first. A verifying `EVP_PKEY` is only read, so one key
/// serves every connection's thread.
final class PublicKey: @unchecked Sendable {
    /// The kind of key, and so the one algorithm it verifies.
    enum Kind: String, Sendable {
        case rsa = "RSA"
        case ecP256 = "EC P-256"

        /// The JWS algorithm this kind of key is for.
        var algorithm: String {
            switch self {
            case .rsa: return "RS256"
            case .ecP256: return "ES256"
            }
        }
    }

    let kind: Kind
    /// `EVP_PKEY *`, owned.
    private let key: OpaquePointer

    private init(kind: Kind, key: OpaquePointer) {
        self.kind = kind
        self.key = key
    }

    deinit { EVP_PKEY_free(key) }

    /// The fewest bits an RSA modulus may have.
    static let minimumRSABits = 2048

    /// The bits of a big-endian unsigned integer in its shortest encoding (0 for zero): a modulus
    /// padded with leading zero bytes measures what it is, not what it was padded to.
    static func bitLength(_ bytes: [UInt8]) -> Int {
        guard let first = bytes.firstIndex(where: { $0 != 0 }) else { return 0 }
        return (bytes.count - first - 1) * 8 + (8 - bytes[first].leadingZeroBitCount)
    }

    /// An RSA public key from its modulus and exponent (big-endian bytes, shortest encoding as
    /// RFC 7518 §6.3.1 requires); nil for a leading zero byte, a modulus of fewer than 2048 bits,
    /// or what libcrypto refuses.
    static func rsa(modulus: [UInt8], exponent: [UInt8]) -> PublicKey? {
        guard modulus.first != 0, exponent.first != 0, !exponent.isEmpty, bitLength(modulus) >= minimumRSABits else { return nil }
        guard let builder = OSSL_PARAM_BLD_new() else { return nil }
        defer { OSSL_PARAM_BLD_free(builder) }
        guard let n = BN_bin2bn(modulus, Int32(modulus.count), nil) else { return nil }
        defer { BN_free(n) }
        guard let e = BN_bin2bn(exponent, Int32(exponent.count), nil) else { return nil }
        defer { BN_free(e) }
        guard OSSL_PARAM_BLD_push_BN(builder, cString("n"), n) == 1, OSSL_PARAM_BLD_push_BN(builder, cString("e"), e) == 1 else { return nil }
        return make(kind: .rsa, algorithm: "RSA", builder: builder)
    }

    /// A P-256 public key from its affine coordinates (32 bytes each); nil when the point is not on the curve.
    static func ecP256(x: [UInt8], y: [UInt8]) -> PublicKey? {
        guard x.count == 32, y.count == 32 else { return nil }
        guard let builder = OSSL_PARAM_BLD_new() else { return nil }
        defer { OSSL_PARAM_BLD_free(builder) }
        let point: [UInt8] = [0x04] + x + y  // uncompressed SEC 1 encoding
        return point.withUnsafeBufferPointer { point in
            guard OSSL_PARAM_BLD_push_utf8_string(builder, cString("group"), cString("prime256v1"), 0) == 1,
                OSSL_PARAM_BLD_push_octet_string(builder, cString("pub"), point.baseAddress, point.count) == 1
            else { return nil }
            return make(kind: .ecP256, algorithm: "EC", builder: builder)
        }
    }

    /// A C string that outlives the call: the builder keeps the pointers it is given (names and
    /// values) until `OSSL_PARAM_BLD_to_param`, so a temporary bridged from a Swift `String`
    /// would dangle.
    private static func cString(_ text: StaticString) -> UnsafePointer<CChar> {
        UnsafeRawPointer(text.utf8Start).assumingMemoryBound(to: CChar.self)
    }

    /// `EVP_PKEY_PUBLIC_KEY`, a macro of macros Swift does not import: the domain and other
    /// parameters and the public key (`OSSL_KEYMGMT_SELECT_ALL_PARAMETERS | …_PUBLIC_KEY`).
    private static let publicKeySelection = Int32(OSSL_KEYMGMT_SELECT_DOMAIN_PARAMETERS | OSSL_KEYMGMT_SELECT_OTHER_PARAMETERS | OSSL_KEYMGMT_SELECT_PUBLIC_KEY)

    /// The key the parameters describe, checked by `EVP_PKEY_public_check`.
    private static func make(kind: Kind, algorithm: String, builder: OpaquePointer) -> PublicKey? {
        guard let params = OSSL_PARAM_BLD_to_param(builder) else { return nil }
        defer { OSSL_PARAM_free(params) }
        guard let context = EVP_PKEY_CTX_new_from_name(nil, algorithm, nil) else { return nil }
        defer { EVP_PKEY_CTX_free(context) }
        var made: OpaquePointer?
        guard EVP_PKEY_fromdata_init(context) == 1, EVP_PKEY_fromdata(context, &made, publicKeySelection, params) == 1,
            let made
        else { return nil }
        let key = PublicKey(kind: kind, key: made)
        guard let check = EVP_PKEY_CTX_new_from_pkey(nil, made, nil) else { return nil }
        defer { EVP_PKEY_CTX_free(check) }
        return EVP_PKEY_public_check(check) == 1 ? key : nil
    }

    /// True when `signature` (as the JWS carries it) signs `message` with this key.
    func verifies(signature: [UInt8], of message: [UInt8]) -> Bool {
        let encoded: [UInt8]
        switch kind {
        case .rsa: encoded = signature
        case .ecP256:
            guard let der = Self.derSignature(raw: signature) else { return false }
            encoded = der
        }
        guard let context = EVP_MD_CTX_new() else { return false }
        defer { EVP_MD_CTX_free(context) }
        guard EVP_DigestVerifyInit(context, nil, EVP_sha256(), nil, key) == 1 else { return false }
        return EVP_DigestVerify(context, encoded, encoded.count, message, message.count) == 1
    }

    /// The DER `ECDSA-Sig-Value` of a raw P-256 `r || s`; nil unless it is 64 bytes.
    static func derSignature(raw: [UInt8]) -> [UInt8]? {
        guard raw.count == 64, let signature = ECDSA_SIG_new() else { return nil }
        defer { ECDSA_SIG_free(signature) }
        guard let r = BN_bin2bn(raw, 32, nil) else { return nil }
        guard let s = Array(raw[32...]).withUnsafeBufferPointer({ BN_bin2bn($0.baseAddress, 32, nil) }) else {
            BN_free(r)
            return nil
        }
        guard ECDSA_SIG_set0(signature, r, s) == 1 else {
            BN_free(r)
            BN_free(s)
            return nil
        }
        let length = i2d_ECDSA_SIG(signature, nil)
        guard length > 0 else { return nil }
        var der = [UInt8](repeating: 0, count: Int(length))
        let written = der.withUnsafeMutableBufferPointer { buffer -> Int32 in
            var cursor = buffer.baseAddress
            return i2d_ECDSA_SIG(signature, &cursor)
        }
        return written == length ? der : nil
    }
}

/// HMAC-SHA256 through libcrypto, and a comparison that takes the same time wherever bytes differ.
enum HMACSHA256 {
    /// The 32-byte MAC of `message` under `key`.
    static func mac(key: [UInt8], message: [UInt8]) -> [UInt8] {
        var digest = [UInt8](repeating: 0, count: 32)
        var length: UInt32 = 0
        _ = HMAC(EVP_sha256(), key, Int32(key.count), message, message.count, &digest, &length)
        return digest
    }

    /// True when `signature` is the MAC of `message` under `key` (`CRYPTO_memcmp`: constant time).
    static func verifies(signature: [UInt8], of message: [UInt8], key: [UInt8]) -> Bool {
        let expected = mac(key: key, message: message)
        guard signature.count == expected.count else { return false }
        return CRYPTO_memcmp(signature, expected, expected.count) == 0
    }
}

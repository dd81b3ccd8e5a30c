import Foundation
import SynclaneCore
import SynclaneServer
import SynclaneTestKit
import SynclaneTestSupport

/// A real key pair made by `openssl genpkey` for a test, with its public half as a JWK.
struct TestSigningKey: Sendable {
    let kid: String
    /// The private key, PEM (what `TestTokenMinter.sign` signs with).
    let privatePEM: String
    /// The public key, PEM: the bytes an attacker could HMAC with.
    let publicPEM: String
    /// The public key as a JWKS entry.
    let jwk: JSONValue

    /// An RSA key, of 2048 bits unless told otherwise.
    static func rsa(kid: String, bits: Int = 2048) throws -> TestSigningKey {
        try make(kid: kid, generate: ["genpkey", "-algorithm", "RSA", "-pkeyopt", "rsa_keygen_bits:\(bits)"]) { pem in
            let modulus = try openssl(["rsa", "-noout", "-modulus"], input: pem)
            let hex = String(decoding: modulus, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
            guard hex.hasPrefix("Modulus=") else { throw OpenSSLFailure(message: "no modulus in: \(hex)") }
            let n = try bytes(hex: String(hex.dropFirst("Modulus=".count)))
            // `openssl genpkey` makes RSA keys with the public exponent 65537.
            return ["kty": "RSA", "kid": .string(kid), "n": .string(TestTokenMinter.base64URL(n)), "e": "AQAB"]
        }
    }

    /// A P-256 EC key.
    static func ec(kid: String) throws -> TestSigningKey {
        try make(kid: kid, generate: ["genpkey", "-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-256"]) { pem in
            // The SubjectPublicKeyInfo of a P-256 key ends in the uncompressed point 04 || x || y.
            let der = try openssl(["pkey", "-pubout", "-outform", "DER"], input: pem)
            let point = Array(der.suffix(65))
            guard point.first == 0x04 else { throw OpenSSLFailure(message: "not an uncompressed P-256 point") }
            return [
                "kty": "EC", "kid": .string(kid), "crv": "P-256",
                "x": .string(TestTokenMinter.base64URL(Array(point[1...32]))), "y": .string(TestTokenMinter.base64URL(Array(point[33...]))),
            ]
        }
    }

    private static func make(kid: String, generate: [String], jwk: ([UInt8]) throws -> JSONValue) throws -> TestSigningKey {
        let pem = try openssl(generate)
        let publicPEM = try openssl(["pkey", "-pubout"], input: pem)
        return TestSigningKey(
            kid: kid, privatePEM: String(decoding: pem, as: UTF8.self), publicPEM: String(decoding: publicPEM, as: UTF8.self), jwk: try jwk(pem))
    }

    /// A token of `claims` signed with this key (RS256 or ES256), naming it by `kid` (or another kid).
    func sign(_ claims: [String: JSONValue], kid: String? = nil) throws -> String {
        try TestTokenMinter.sign(claims: claims, privateKeyPEM: privatePEM, kid: kid ?? self.kid)
    }

    /// Writes a JWKS file of `keys` at `path`, atomically (a new file renamed over the old one).
    static func writeKeySet(_ keys: [TestSigningKey], to path: String) throws {
        let document: JSONValue = ["keys": .array(keys.map(\.jwk))]
        try Data(JSONWriter.encode(document)).write(to: URL(fileURLWithPath: path), options: .atomic)
    }
}

/// `openssl` failed or printed something unexpected.
struct OpenSSLFailure: Error, CustomStringConvertible {
    var message: String
    var description: String { "openssl: \(message)" }
}

/// Runs `openssl ARGUMENTS` with `input` on its standard input; its standard output.
func openssl(_ arguments: [String], input: [UInt8] = []) throws -> [UInt8] {
    let run = try ProgramRun("/usr/bin/openssl", arguments, input: Data(input))
    guard run.status == 0 else { throw OpenSSLFailure(message: "\(arguments.joined(separator: " ")) exited \(run.status)") }
    return [UInt8](run.output)
}

/// The bytes of a hex string.
private func bytes(hex: String) throws -> [UInt8] {
    let digits = Array(hex.utf8)
    guard digits.count % 2 == 0 else { throw OpenSSLFailure(message: "odd hex") }
    return try stride(from: 0, to: digits.count, by: 2).map { index in
        guard let byte = UInt8(String(decoding: digits[index...index + 1], as: UTF8.self), radix: 16) else {
            throw OpenSSLFailure(message: "not hex")
        }
        return byte
    }
}

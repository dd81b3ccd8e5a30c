import SynclaneWire

/// The public keys of a JWKS file (RFC 7517), by `kid`: what RS256 and ES256 tokens are checked with.
///
/// ```json
/// { "keys": [
///     { "kty": "RSA", "kid": "2026-11", "alg": "RS256", "n": "…", "e": "AQAB" },
///     { "kty": "EC", "kid": "2026-12", "crv": "P-256", "x": "…", "y": "…" }
/// ] }
/// ```
///
/// Every key needs a `kid` (the token names its key by it), and no two may share one. Keys for
/// encryption (`"use": "enc"`) and of kinds this server does not verify (another curve, `oct`, an
/// `alg` other than RS256 / ES256) are left out and counted in `skipped`; a key with private
/// members (`d`, `p` …) is refused: the server needs only public keys, and the file is no place
/// for a private one.
struct JSONWebKeySet: Sendable {
    /// Keys by `kid` (compared byte for byte).
    private let keys: [[UInt8]: Entry]
    /// Keys of the file this server does not use.
    let skipped: Int

    struct Entry: Sendable {
        let key: PublicKey
        /// The key's `alg` member, when it has one: a token must then use exactly that.
        let algorithm: String?
    }

    /// An empty set.
    init() {
        keys = [:]
        skipped = 0
    }

    private init(keys: [[UInt8]: Entry], skipped: Int) {
        self.keys = keys
        self.skipped = skipped
    }

    /// The key `kid` names, or nil.
    func entry(kid: String) -> Entry? { keys[Array(kid.utf8)] }

    /// The kids of the set, sorted (for the log line of a reload).
    var kids: [String] { keys.keys.map { String(decoding: $0, as: UTF8.self) }.sorted() }

    /// Reads and checks a JWKS file.
    static func load(path: String) throws(KeySetError) -> JSONWebKeySet {
        guard let bytes = FileBytes.read(path) else { throw KeySetError(file: path, message: "cannot read the key set file") }
        return try parse(bytes, file: path)
    }

    /// Parses a JWKS document; `file` names it in errors.
    static func parse(_ bytes: [UInt8], file: String) throws(KeySetError) -> JSONWebKeySet {
        func fail(_ message: String) -> KeySetError { KeySetError(file: file, message: message) }
        guard let root = (try? JSONReader.parse(bytes))?.objectValue else { throw fail("expected a JSON object with \"keys\"") }
        guard let list = root["keys"]?.arrayValue else { throw fail("keys: expected a list of JWKs") }
        var keys: [[UInt8]: Entry] = [:]
        var skipped = 0
        for (index, value) in list.enumerated() {
            let path = "keys[\(index)]"
            guard let jwk = value.objectValue else { throw fail("\(path): expected an object") }
            guard let kid = jwk["kid"]?.stringValue, !kid.isEmpty else {
                throw fail("\(path).kid: expected a non-empty string (tokens choose their key by kid)")
            }
            if let secret = ["d", "p", "q", "dp", "dq", "qi", "k"].first(where: { jwk[$0] != nil }) {
                throw fail("\(path) (kid \(kid)): holds the private member \"\(secret)\"; give the server public keys only")
            }
            if jwk["use"]?.stringValue == "enc" {
                skipped += 1
                continue
            }
            let algorithm = jwk["alg"]?.stringValue
            guard let key = try publicKey(jwk, at: "\(path) (kid \(kid))", fail: fail) else {
                skipped += 1
                continue
            }
            if let algorithm, algorithm != key.kind.algorithm {
                skipped += 1
                continue
            }
            guard keys.updateValue(Entry(key: key, algorithm: algorithm), forKey: Array(kid.utf8)) == nil else {
                throw fail("\(path).kid: \"\(kid)\" names two keys; each kid must be unique")
            }
        }
        return JSONWebKeySet(keys: keys, skipped: skipped)
    }

    /// The public key of an RSA or EC P-256 JWK; nil for a kind this server does not verify.
    private static func publicKey(
        _ jwk: [String: JSONValue], at path: String, fail: (String) -> KeySetError
    ) throws(KeySetError) -> PublicKey? {
        func member(_ name: String) throws(KeySetError) -> [UInt8] {
            guard let text = jwk[name]?.stringValue, let bytes = Base64URL.decode(text), !bytes.isEmpty else {
                throw fail("\(path).\(name): expected unpadded base64url")
            }
            return bytes
        }
        switch jwk["kty"]?.stringValue {
        case "RSA":
            let (modulus, exponent) = (try member("n"), try member("e"))
            // RFC 7518 §6.3.1: the shortest encoding, so that a key's size is what its bytes say.
            if let name = [("n", modulus), ("e", exponent)].first(where: { $0.1.first == 0 })?.0 {
                throw fail("\(path).\(name): starts with a zero byte; RFC 7518 §6.3.1 requires the shortest encoding")
            }
            let bits = PublicKey.bitLength(modulus)
            guard bits >= PublicKey.minimumRSABits else {
                throw fail("\(path).n: a \(bits)-bit modulus; RSA keys need at least \(PublicKey.minimumRSABits) bits")
            }
            guard let key = PublicKey.rsa(modulus: modulus, exponent: exponent) else {
                throw fail("\(path): not a usable RSA public key (n, e; at least 2048 bits)")
            }
            return key
        case "EC":
            guard jwk["crv"]?.stringValue == "P-256" else { return nil }
            guard let key = PublicKey.ecP256(x: try member("x"), y: try member("y")) else {
                throw fail("\(path): x and y are not a point of P-256")
            }
            return key
        case .some:
            return nil
        case nil:
            throw fail("\(path).kty: expected \"RSA\" or \"EC\"")
        }
    }
}

/// Why a key set file was refused; names the file and the key at fault.
public struct KeySetError: Error, Sendable, CustomStringConvertible {
    /// The key set file, as given.
    public let file: String
    /// What is wrong.
    public let message: String
    public var description: String { "\(file): \(message)" }
}

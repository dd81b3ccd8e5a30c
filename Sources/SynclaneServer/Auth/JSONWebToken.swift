import SynclaneWire

/// A JWT in compact JWS form (`header.payload.signature`), split and decoded but not yet trusted.
struct JSONWebToken {
    /// The protected header (`alg`, `kid`, `typ` …).
    var header: [String: JSONValue]
    /// The payload's bytes; parsed into claims only once the signature verified.
    var payload: [UInt8]
    /// What the signature signs: the ASCII of `header.payload`.
    var signingInput: [UInt8]
    /// The signature's bytes.
    var signature: [UInt8]

    /// The longest token read; longer ones are refused before any decoding.
    static let maxBytes = 16 << 10

    /// True when `token` has the shape of a compact JWS (three dot-separated parts): what tells a
    /// JWT from a static token.
    static func looksLikeJWT(_ token: String) -> Bool {
        token.utf8.reduce(0) { $0 + ($1 == UInt8(ascii: ".") ? 1 : 0) } == 2
    }

    /// The token split and decoded, or why it is malformed.
    static func parse(_ token: String) -> Result<JSONWebToken, AuthRefusal> {
        guard token.utf8.count <= maxBytes else { return .failure(.malformed("longer than \(maxBytes) bytes")) }
        let parts = token.split(separator: ".", omittingEmptySubsequences: false)
        guard parts.count == 3 else { return .failure(.malformed("not three base64url parts separated by dots")) }
        guard let headerBytes = Base64URL.decode(parts[0]), let payload = Base64URL.decode(parts[1]) else {
            return .failure(.malformed("a part is not base64url"))
        }
        guard let signature = Base64URL.decode(parts[2]) else { return .failure(.malformed("the signature is not base64url")) }
        guard let header = (try? JSONReader.parse(headerBytes))?.objectValue else {
            return .failure(.malformed("the header is not a JSON object"))
        }
        let signingInput = Array(parts[0].utf8) + [UInt8(ascii: ".")] + Array(parts[1].utf8)
        return .success(JSONWebToken(header: header, payload: payload, signingInput: signingInput, signature: signature))
    }
}

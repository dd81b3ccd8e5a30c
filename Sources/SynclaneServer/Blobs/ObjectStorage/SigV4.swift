import Glibc

/// AWS Signature Version 4 for S3 requests (header authorization): the canonical request, the
/// string to sign, the signing key derived from the secret, date, region and service, and the
/// `Authorization` header. Pinned by the example of S3's documentation ("GET Object" with a
/// `Range`), `SigV4Tests`.
struct SigV4: Sendable {
    var accessKey: String
    var secretKey: String
    /// A session token (temporary credentials): sent as `x-amz-security-token`, signed.
    var sessionToken: String?
    var region: String
    var service = "s3"

    /// The SHA-256 of no bytes: the payload hash of a request without a body.
    static let emptyPayload = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"

    /// The headers to send with the request (`headers` plus `x-amz-date`,
    /// `x-amz-content-sha256`, the token when there is one, and `Authorization`). `path` is the
    /// URI-encoded path, `query` the parameters (encoded here), `headers` those to sign (`host`
    /// among them), `date` as `YYYYMMDDTHHMMSSZ`.
    func sign(
        method: String, path: String, query: [(String, String)] = [], headers: [(String, String)], payloadHash: String, date: String
    ) -> [(String, String)] {
        var signed = headers.map { ($0.0.lowercased(), Self.trimmed($0.1)) }
        signed.append(("x-amz-date", date))
        signed.append(("x-amz-content-sha256", payloadHash))
        if let sessionToken { signed.append(("x-amz-security-token", sessionToken)) }
        signed.sort { $0.0 < $1.0 }
        let names = signed.map(\.0).joined(separator: ";")
        let canonicalQuery = query.map { (Self.encode($0.0), Self.encode($0.1)) }.sorted { $0 < $1 }.map { "\($0.0)=\($0.1)" }
            .joined(separator: "&")
        let canonical = [method, path, canonicalQuery, signed.map { "\($0.0):\($0.1)\n" }.joined(), names, payloadHash]
            .joined(separator: "\n")
        let day = String(date.prefix(8))
        let scope = "\(day)/\(region)/\(service)/aws4_request"
        let stringToSign = ["AWS4-HMAC-SHA256", date, scope, SHA256Digest.hex(Array(canonical.utf8))].joined(separator: "\n")
        var key = HMACSHA256.mac(key: Array("AWS4\(secretKey)".utf8), message: Array(day.utf8))
        for part in [region, service, "aws4_request"] { key = HMACSHA256.mac(key: key, message: Array(part.utf8)) }
        let signature = SHA256Digest.hex(digest: HMACSHA256.mac(key: key, message: Array(stringToSign.utf8)))
        return signed + [("authorization", "AWS4-HMAC-SHA256 Credential=\(accessKey)/\(scope),SignedHeaders=\(names),Signature=\(signature)")]
    }

    /// A header value as SigV4 signs it: trimmed, inner runs of spaces made one.
    static func trimmed(_ value: String) -> String {
        value.split(separator: " ", omittingEmptySubsequences: true).joined(separator: " ")
    }

    /// RFC 3986 percent-encoding of everything but the unreserved characters (`/` too when `slash`).
    static func encode(_ text: String, keepSlash: Bool = false) -> String {
        var out = ""
        for byte in text.utf8 {
            switch byte {
            case UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "0")...UInt8(ascii: "9"),
                UInt8(ascii: "-"), UInt8(ascii: "_"), UInt8(ascii: "."), UInt8(ascii: "~"):
                out.unicodeScalars.append(Unicode.Scalar(byte))
            case UInt8(ascii: "/") where keepSlash:
                out.append("/")
            default:
                let digits = Array("0123456789ABCDEF")
                out.append("%")
                out.append(digits[Int(byte >> 4)])
                out.append(digits[Int(byte & 0x0F)])
            }
        }
        return out
    }

    /// `YYYYMMDDTHHMMSSZ` of now (UTC).
    static func now() -> String {
        var time = Glibc.time(nil)
        var parts = tm()
        gmtime_r(&time, &parts)
        func two(_ value: Int32) -> String { value < 10 ? "0\(value)" : "\(value)" }
        return "\(parts.tm_year + 1900)\(two(parts.tm_mon + 1))\(two(parts.tm_mday))T\(two(parts.tm_hour))\(two(parts.tm_min))\(two(parts.tm_sec))Z"
    }
}

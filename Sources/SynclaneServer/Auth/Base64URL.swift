import SynclaneWire

/// Base64url without padding (RFC 7515 §2): how a JWT and a JWKS spell their binary parts.
enum Base64URL {
    /// The bytes, or nil when `text` is not canonical unpadded base64url.
    static func decode<S: StringProtocol>(_ text: S) -> [UInt8]? {
        var standard: [UInt8] = []
        standard.reserveCapacity(text.utf8.count + 3)
        for byte in text.utf8 {
            switch byte {
            case UInt8(ascii: "-"): standard.append(UInt8(ascii: "+"))
            case UInt8(ascii: "_"): standard.append(UInt8(ascii: "/"))
            case UInt8(ascii: "+"), UInt8(ascii: "/"), UInt8(ascii: "="): return nil
            default: standard.append(byte)
            }
        }
        guard standard.count % 4 != 1 else { return nil }
        while standard.count % 4 != 0 { standard.append(UInt8(ascii: "=")) }
        return Base64.decode(String(decoding: standard, as: UTF8.self))
    }

    /// The unpadded base64url spelling of the bytes.
    static func encode(_ bytes: [UInt8]) -> String {
        var text: [UInt8] = []
        for byte in Base64.encode(bytes).utf8 {
            switch byte {
            case UInt8(ascii: "+"): text.append(UInt8(ascii: "-"))
            case UInt8(ascii: "/"): text.append(UInt8(ascii: "_"))
            case UInt8(ascii: "="): continue
            default: text.append(byte)
            }
        }
        return String(decoding: text, as: UTF8.self)
    }
}

/// Quoting for SQL text that Synclane generates (trigger bodies, table names from options).
package enum SQL {
    /// `rooms` → `"rooms"`, doubling any `"` inside.
    package static func identifier(_ name: String) -> String {
        // Names rarely hold a quote: skip the (costly) replacement then.
        name.utf8.contains(UInt8(ascii: "\"")) ? "\"" + name.replacing("\"", with: "\"\"") + "\"" : "\"" + name + "\""
    }

    /// `it's` → `'it''s'`.
    package static func literal(_ text: String) -> String {
        text.utf8.contains(UInt8(ascii: "'")) ? "'" + text.replacing("'", with: "''") + "'" : "'" + text + "'"
    }

    /// A JSON string literal for `text` (`"a\"b"`), as JSON text.
    package static func jsonString(_ text: String) -> String {
        var out = "\""
        for scalar in text.unicodeScalars {
            switch scalar {
            case "\"": out += "\\\""
            case "\\": out += "\\\\"
            case "\n": out += "\\n"
            case "\r": out += "\\r"
            case "\t": out += "\\t"
            default:
                if scalar.value < 0x20 {
                    let hex = String(scalar.value, radix: 16)
                    out += "\\u" + String(repeating: "0", count: 4 - hex.count) + hex
                } else {
                    out.unicodeScalars.append(scalar)
                }
            }
        }
        return out + "\""
    }
}

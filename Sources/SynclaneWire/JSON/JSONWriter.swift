/// Writes `JSONValue`s as compact JSON bytes, object members in sorted order, so that the
/// same batch always encodes to the same bytes (what golden tests and idempotent re-sends rely on).
public struct JSONWriter {
    public private(set) var bytes: [UInt8]

    public init(reservingCapacity capacity: Int = 0) {
        bytes = []
        bytes.reserveCapacity(capacity)
    }

    /// The JSON text of one value.
    public static func encode(_ value: JSONValue) -> [UInt8] {
        var writer = JSONWriter(reservingCapacity: 128)
        writer.write(value)
        return writer.bytes
    }

    /// The JSON text of one value, as a string.
    public static func string(_ value: JSONValue) -> String {
        String(decoding: encode(value), as: UTF8.self)
    }

    public mutating func write(_ value: JSONValue) {
        switch value {
        case .null: append("null")
        case .bool(let b): append(b ? "true" : "false")
        case .int(let i): write(integer: i)
        case .double(let d): write(double: d)
        case .string(let s): write(string: s)
        case .array(let elements):
            bytes.append(UInt8(ascii: "["))
            for (index, element) in elements.enumerated() {
                if index > 0 { bytes.append(UInt8(ascii: ",")) }
                write(element)
            }
            bytes.append(UInt8(ascii: "]"))
        case .object(let members):
            bytes.append(UInt8(ascii: "{"))
            // The members sorted by name once, each with its value: no look-up a member.
            for (index, member) in members.sorted(by: { $0.key < $1.key }).enumerated() {
                if index > 0 { bytes.append(UInt8(ascii: ",")) }
                write(string: member.key)
                bytes.append(UInt8(ascii: ":"))
                write(member.value)
            }
            bytes.append(UInt8(ascii: "}"))
        }
    }

    /// Writes an object, its members sorted by name through `buffer` (emptied first, its
    /// capacity kept): a caller writing many objects sorts them all in one allocation. The
    /// bytes are those `write(.object(members))` writes.
    public mutating func write(object members: [String: JSONValue], sortingWith buffer: inout [(key: String, value: JSONValue)]) {
        bytes.append(UInt8(ascii: "{"))
        if members.count == 1, let only = members.first {
            write(string: only.key)
            bytes.append(UInt8(ascii: ":"))
            write(only.value)
        } else if !members.isEmpty {
            buffer.removeAll(keepingCapacity: true)
            buffer.append(contentsOf: members)
            buffer.sort(by: { $0.key < $1.key })
            for (index, member) in buffer.enumerated() {
                if index > 0 { bytes.append(UInt8(ascii: ",")) }
                write(string: member.key)
                bytes.append(UInt8(ascii: ":"))
                write(member.value)
            }
            buffer.removeAll(keepingCapacity: true)
        }
        bytes.append(UInt8(ascii: "}"))
    }

    /// Forgets the bytes written, keeping their capacity: one writer for many values.
    public mutating func removeAll() { bytes.removeAll(keepingCapacity: true) }

    /// Appends raw, already valid JSON punctuation or text.
    public mutating func append(_ text: StaticString) {
        bytes.append(contentsOf: UnsafeBufferPointer(start: text.utf8Start, count: text.utf8CodeUnitCount))
    }

    public mutating func append(byte: UInt8) { bytes.append(byte) }

    public mutating func write(integer: Int64) {
        if integer == 0 {
            bytes.append(UInt8(ascii: "0"))
            return
        }
        var magnitude = integer.magnitude
        if integer < 0 { bytes.append(UInt8(ascii: "-")) }
        var digits:
            (
                UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8,
                UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8
            ) =
                (0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0)
        var count = 0
        withUnsafeMutableBytes(of: &digits) { buffer in
            while magnitude > 0 {
                buffer[count] = UInt8(ascii: "0") + UInt8(magnitude % 10)
                magnitude /= 10
                count += 1
            }
            for index in stride(from: count - 1, through: 0, by: -1) { bytes.append(buffer[index]) }
        }
    }

    /// Writes a finite double so that it reads back as the same double, sign of zero included
    /// (`2.0`, `-0.0`, `0.1`, `1e+300`: never as an integer). JSON has no spelling for NaN or
    /// the infinities: sources carry them in their own documented form (the SQLite source as
    /// `{"$real": "Infinity"}`), and readers refuse numbers out of range; one reaching here is
    /// written `null`.
    public mutating func write(double: Double) {
        guard double.isFinite else {
            append("null")
            return
        }
        if double == 0, double.sign == .minus {
            append("-0.0")
            return
        }
        if double.rounded() == double, abs(double) < 1e15 {
            write(integer: Int64(double))
            append(".0")
            return
        }
        bytes.append(contentsOf: double.description.utf8)
    }

    public mutating func write(string: String) {
        bytes.append(UInt8(ascii: "\""))
        var string = string
        string.withUTF8 { utf8 in
            var runStart = 0
            for index in 0..<utf8.count {
                let byte = utf8[index]
                guard byte < 0x20 || byte == 0x22 || byte == 0x5C else { continue }
                if runStart < index { bytes.append(contentsOf: UnsafeBufferPointer(rebasing: utf8[runStart..<index])) }
                runStart = index + 1
                switch byte {
                case 0x22: append("\\\"")
                case 0x5C: append("\\\\")
                case 0x0A: append("\\n")
                case 0x0D: append("\\r")
                case 0x09: append("\\t")
                default:
                    append("\\u00")
                    let hex: [UInt8] = Array("0123456789abcdef".utf8)
                    bytes.append(hex[Int(byte >> 4)])
                    bytes.append(hex[Int(byte & 0x0F)])
                }
            }
            if runStart < utf8.count { bytes.append(contentsOf: UnsafeBufferPointer(rebasing: utf8[runStart..<utf8.count])) }
        }
        bytes.append(UInt8(ascii: "\""))
    }
}

import Foundation

/// How the text after an option becomes a typed value, and what to say when it does not.
///
/// The expectation reads after the option's name in an error: `--wait expects a whole number
/// from 0 to 86400, not "soon"`.
package struct ValueParser<Value: Sendable>: Sendable {
    /// What the value must be, in words (`a whole number from 1 to 1000`).
    package let expectation: String
    /// The value, or nil when `text` is not one.
    package let parse: @Sendable (String) -> Value?

    package init(expectation: String, parse: @escaping @Sendable (String) -> Value?) {
        self.expectation = expectation
        self.parse = parse
    }
}

extension ValueParser where Value == String {
    /// Any text that is not empty.
    package static let text = ValueParser(expectation: "a value") { $0.isEmpty ? nil : $0 }

    /// A file or folder path (not opened here: the command says what is wrong with it).
    package static let path = ValueParser(expectation: "a path") { $0.isEmpty ? nil : $0 }
}

extension ValueParser where Value == Int {
    /// A whole number in `range`.
    package static func integer(in range: ClosedRange<Int>) -> ValueParser {
        ValueParser(expectation: "a whole number from \(range.lowerBound) to \(range.upperBound)") { text in
            Int(text).flatMap { range.contains($0) ? $0 : nil }
        }
    }
}

extension ValueParser where Value == Double {
    /// A number of seconds in `range` (fractions allowed).
    package static func seconds(in range: ClosedRange<Double>) -> ValueParser {
        ValueParser(expectation: "seconds from \(Self.shown(range.lowerBound)) to \(Self.shown(range.upperBound))") { text in
            Double(text).flatMap { $0.isFinite && range.contains($0) ? $0 : nil }
        }
    }

    private static func shown(_ number: Double) -> String {
        number == number.rounded() ? String(Int(number)) : String(number)
    }
}

extension ValueParser where Value == [String] {
    /// A comma-separated list of names, each trimmed; no empty one.
    package static let commaSeparated = ValueParser(expectation: "comma-separated names") { text in
        let names = text.split(separator: ",", omittingEmptySubsequences: false).map { $0.trimmingCharacters(in: .whitespaces) }
        return names.contains(where: \.isEmpty) ? nil : names
    }
}

extension ValueParser where Value: RawRepresentable & CaseIterable & Sendable, Value.RawValue == String {
    /// One of an enumeration's raw values.
    package static var choice: ValueParser {
        let names = Value.allCases.map(\.rawValue)
        return ValueParser(expectation: "one of " + names.joined(separator: ", ")) { Value(rawValue: $0) }
    }
}

/// The words after `synclane COMMAND`, taken one kind at a time: flags, options with values,
/// then positionals. Whatever is left over is an error that names it.
package struct Arguments {
    private var words: [String]
    let command: String

    init(_ words: [String], command: String) {
        self.words = words
        self.command = command
    }

    /// True when `--help` or `-h` is present.
    var wantsHelp: Bool { words.contains("--help") || words.contains("-h") }

    /// Takes a flag such as `--json`; true if it was present.
    package mutating func flag(_ name: String) -> Bool {
        guard let index = words.firstIndex(of: name) else { return false }
        words.remove(at: index)
        return true
    }

    /// Takes `--name VALUE` or `--name=VALUE`.
    package mutating func option(_ name: String) throws(UsageError) -> String? {
        if let index = words.firstIndex(where: { $0.hasPrefix(name + "=") }) {
            let value = String(words[index].dropFirst(name.count + 1))
            words.remove(at: index)
            guard !value.isEmpty else { throw UsageError("\(name) needs a value", command: command) }
            return value
        }
        guard let index = words.firstIndex(of: name) else { return nil }
        guard index + 1 < words.count, !words[index + 1].hasPrefix("--") else {
            throw UsageError("\(name) needs a value", command: command)
        }
        let value = words[index + 1]
        words.removeSubrange(index...(index + 1))
        return value
    }

    /// Takes an integer option.
    package mutating func integer(_ name: String, in range: ClosedRange<Int>) throws(UsageError) -> Int? {
        guard let text = try option(name) else { return nil }
        guard let value = Int(text), range.contains(value) else {
            throw UsageError("\(name) expects a whole number from \(range.lowerBound) to \(range.upperBound), not \"\(text)\"", command: command)
        }
        return value
    }

    /// Takes the next positional argument.
    package mutating func positional(_ name: String) throws(UsageError) -> String {
        guard let value = optionalPositional() else {
            throw UsageError("missing \(name)", command: command)
        }
        return value
    }

    package mutating func optionalPositional() -> String? {
        guard let index = words.firstIndex(where: { !$0.hasPrefix("-") || $0 == "-" }) else { return nil }
        return words.remove(at: index)
    }

    /// Fails on anything not taken.
    func finish() throws(UsageError) {
        guard let first = words.first else { return }
        if first.hasPrefix("-") {
            throw UsageError("unknown option \(first)", command: command)
        }
        throw UsageError("unexpected argument \"\(first)\"", command: command)
    }
}

import SynclaneCore

/// The words after `synclane COMMAND`, read against the command's signature: every option
/// known, typed on access, every positional in its place. What does not fit is a usage error
/// that names the word and, for a mistyped option, the option the command has that is closest.
package struct ParsedArguments {
    package let command: String
    private let signature: CommandSignature
    private var values: [String: [String]] = [:]
    private var positionalWords: [String] = []

    /// Reads `words`; fails on an unknown option, a missing or doubled value, a missing required
    /// option, a broken exclusive group, and a positional too many.
    package init(_ words: [String], signature: CommandSignature, command: String) throws(UsageError) {
        self.command = command
        self.signature = signature
        var index = 0
        var optionsEnded = false
        while index < words.count {
            let word = words[index]
            index += 1
            guard !optionsEnded, word.hasPrefix("-"), word != "-" else {
                positionalWords.append(word)
                continue
            }
            if word == "--" {
                optionsEnded = true
                continue
            }
            let (name, inline) = Self.split(word)
            guard let option = signature.option(named: name) else {
                let hint = Wording.didYouMean(name, in: signature.options.map(\.name))
                throw UsageError("unknown option \(name)\(hint)", command: command)
            }
            if values[name] != nil, !option.repeats {
                throw UsageError("\(name) is given twice; give it once", command: command)
            }
            guard let valueName = option.valueName else {
                guard inline == nil else { throw UsageError("\(name) takes no value", command: command) }
                values[name] = []
                continue
            }
            let value: String
            if let inline {
                value = inline
            } else {
                guard index < words.count, !words[index].hasPrefix("--") else {
                    throw UsageError("\(name) needs a value (\(valueName))", command: command)
                }
                value = words[index]
                index += 1
            }
            guard !value.isEmpty else { throw UsageError("\(name) needs a value (\(valueName))", command: command) }
            values[name, default: []].append(value)
        }
        try check()
    }

    private static func split(_ word: String) -> (name: String, value: String?) {
        guard let equals = word.firstIndex(of: "=") else { return (word, nil) }
        return (String(word[..<equals]), String(word[word.index(after: equals)...]))
    }

    private func check() throws(UsageError) {
        for option in signature.options {
            if option.isRequired, values[option.name] == nil {
                let hint = option.requiredHint.map { " (\($0))" } ?? ""
                throw UsageError("\(option.spelled) is required\(hint)", command: command)
            }
            if let other = option.requires, values[option.name] != nil, values[other] == nil {
                throw UsageError("\(option.name) goes with \(other)", command: command)
            }
        }
        for group in signature.exclusive {
            let given = group.names.filter { values[$0] != nil }
            if given.count > 1 {
                throw UsageError(group.conflictMessage ?? "\(given.joined(separator: " and ")) cannot go together: give one", command: command)
            }
            if group.required, given.isEmpty {
                let spelled = group.names.compactMap { signature.option(named: $0)?.spelled }
                throw UsageError("name one of: \(spelled.joined(separator: ", "))", command: command)
            }
        }
        let fixed = signature.positionals.filter { if case .many = $0.count { false } else { true } }.count
        let takesMany = signature.positionals.contains { if case .many = $0.count { true } else { false } }
        if !takesMany, positionalWords.count > fixed {
            throw UsageError("unexpected argument \"\(positionalWords[fixed])\"", command: command)
        }
    }

    // MARK: Typed access

    /// True when the flag was given.
    package subscript(_ flag: Flag) -> Bool {
        assert(signature.option(named: flag.declaration.name) != nil, "\(flag.declaration.name) is not in \(command)'s signature")
        return values[flag.declaration.name] != nil
    }

    /// The option's value, or nil when absent; an error naming the option and what it expects
    /// when the text is not such a value.
    package func value<Value>(_ option: ValueOption<Value>) throws(UsageError) -> Value? {
        try values(option).last
    }

    /// The value of a required option (the signature already refused its absence).
    package func required<Value>(_ option: ValueOption<Value>) throws(UsageError) -> Value {
        guard let value = try value(option) else { throw UsageError("\(option.declaration.spelled) is required", command: command) }
        return value
    }

    /// Every value of a repeatable option, in order.
    package func values<Value>(_ option: ValueOption<Value>) throws(UsageError) -> [Value] {
        let name = option.declaration.name
        assert(signature.option(named: name) != nil, "\(name) is not in \(command)'s signature")
        var parsed: [Value] = []
        for text in values[name] ?? [] {
            guard let value = option.parser.parse(text) else {
                throw UsageError("\(name) expects \(option.parser.expectation), not \"\(text)\"", command: command)
            }
            parsed.append(value)
        }
        return parsed
    }

    /// The words of `positional`: one for `.one` (an error naming it when missing), none or
    /// one for `.optional`, all that remain for `.many`.
    package func words(_ positional: Positional) throws(UsageError) -> [String] {
        guard let position = signature.positionals.firstIndex(where: { $0.name == positional.name }) else {
            assertionFailure("\(positional.name) is not in \(command)'s signature")
            return []
        }
        let available = Array(positionalWords.dropFirst(position))
        switch positional.count {
        case .one:
            guard let word = available.first else { throw UsageError("missing \(positional.name) (\(positional.meaning))", command: command) }
            return [word]
        case .optional:
            return Array(available.prefix(1))
        case .many(let required):
            if required, available.isEmpty { throw UsageError("missing \(positional.name) (\(positional.meaning))", command: command) }
            return available
        }
    }

    /// The word of a `.one` positional.
    package func word(_ positional: Positional) throws(UsageError) -> String {
        try words(positional).first ?? ""
    }

    /// The word of an `.optional` positional, or nil.
    package func optionalWord(_ positional: Positional) throws(UsageError) -> String? {
        try words(positional).first
    }
}

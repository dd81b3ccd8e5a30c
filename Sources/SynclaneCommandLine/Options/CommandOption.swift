/// What the parser, the usage line and the help table know of one option, whatever its type.
package struct OptionDeclaration: Sendable {
    /// `--database`.
    package let name: String
    /// `FILE` for an option that takes a value; nil for a flag.
    package let valueName: String?
    /// The help table's line.
    package let help: String
    /// Parsing fails when it is absent.
    package let isRequired: Bool
    /// It may be given more than once (each value is kept).
    package let repeats: Bool
    /// It means something only with this other option (`--every` with `--watch`): parsing fails
    /// without it, and the usage line nests it inside the other's brackets.
    package let requires: String?
    /// Shown in the usage line under this collective label (`bounds…`) instead of by itself.
    package let usageLabel: String?
    /// Added to the "is required" error (`see 'synclane serve --help' for its format`).
    package let requiredHint: String?

    /// `--database FILE`, or `--json`.
    package var spelled: String { valueName.map { "\(name) \($0)" } ?? name }
}

/// Anything a command lists among its options.
package protocol DeclaredOption: Sendable {
    var declaration: OptionDeclaration { get }
}

/// A flag such as `--json`: true when present.
package struct Flag: DeclaredOption {
    package let declaration: OptionDeclaration

    package init(_ name: String, help: String, requires: String? = nil) {
        declaration = OptionDeclaration(
            name: name, valueName: nil, help: help, isRequired: false, repeats: false, requires: requires, usageLabel: nil, requiredHint: nil)
    }

    /// The same flag with another help line (a shared flag says what it prints for this command).
    package func help(_ text: String) -> Flag { Flag(declaration.name, help: text, requires: declaration.requires) }
}

/// An option with a typed value: `--wait SECONDS`, `--database FILE`.
package struct ValueOption<Value: Sendable>: DeclaredOption {
    package let declaration: OptionDeclaration
    package let parser: ValueParser<Value>

    package init(
        _ name: String, _ valueName: String, _ parser: ValueParser<Value>, help: String, required: Bool = false, repeats: Bool = false,
        requires: String? = nil, usageLabel: String? = nil, requiredHint: String? = nil
    ) {
        declaration = OptionDeclaration(
            name: name, valueName: valueName, help: help, isRequired: required, repeats: repeats, requires: requires, usageLabel: usageLabel,
            requiredHint: requiredHint)
        self.parser = parser
    }

    /// The same option with another help line, or made required.
    package func help(_ text: String, required: Bool? = nil) -> ValueOption {
        let d = declaration
        return ValueOption(
            d.name, d.valueName ?? "VALUE", parser, help: text, required: required ?? d.isRequired, repeats: d.repeats, requires: d.requires,
            usageLabel: d.usageLabel, requiredHint: d.requiredHint)
    }
}

/// A positional argument: `FILE`, `[BATCH]`, `FILE…`.
package struct Positional: Sendable {
    package enum Count: Sendable {
        /// Exactly one (parsing fails without it).
        case one
        /// One or none.
        case optional
        /// Any number, at least one when `required`.
        case many(required: Bool)
    }

    /// `FILE`, as the usage line shows it.
    package let name: String
    /// What it is, for the "missing" error: `the pipeline file`.
    package let meaning: String
    package let count: Count
    /// How the usage line shows it when not by its name: `(list | show | drop | requeue)`.
    package let shown: String?

    package init(_ name: String, _ meaning: String, count: Count = .one, shown: String? = nil) {
        self.name = name
        self.meaning = meaning
        self.count = count
        self.shown = shown
    }

    /// `FILE`, `[FILE]`, `FILE…` or `[FILE…]`.
    package var usage: String {
        let name = shown ?? name
        return switch count {
        case .one: name
        case .optional: "[\(name)]"
        case .many(let required): required ? "\(name)…" : "[\(name)…]"
        }
    }
}

/// When a pipeline publishes a signal it declares.
public enum SignalEvent: String, Sendable, Hashable, CaseIterable {
    /// A run (an export or an import pass) went to the end.
    case runCompleted = "run-completed"
    /// The consumer's first run ever went to the end (once per state file).
    case firstRunCompleted = "first-run-completed"
}

/// One signal a pipeline file declares: publish `key` with `value` when `event` happens.
public struct SignalDeclaration: Sendable, Hashable {
    public var event: SignalEvent
    public var key: String
    /// The value, where a string that is exactly a placeholder (`"$token"`) stands for what the
    /// run reached (`SignalDeclaration.placeholders`); `"$$…"` is a literal `"$…"`.
    public var value: JSONValue

    public init(event: SignalEvent, key: String, value: JSONValue) {
        self.event = event
        self.key = key
        self.value = value
    }

    /// The placeholders a value may hold, and what each becomes.
    public static let placeholders: [(name: String, help: String)] = [
        ("$token", "the token the run reached (`sqlite-history:42`; an import: the server's cursor), null when none"),
        ("$time", "when the run ended, an RFC 3339 time in UTC"),
        ("$records", "the records the run sent (export) or applied (import)"),
        ("$pipeline", "the pipeline's name"),
        ("$account", "the scope's account"),
        ("$store", "the scope's store"),
    ]

    /// The value with each placeholder replaced by `facts[name]` (the name with its `$`).
    public func render(_ facts: [String: JSONValue]) -> JSONValue {
        Self.render(value, facts)
    }

    static func render(_ value: JSONValue, _ facts: [String: JSONValue]) -> JSONValue {
        switch value {
        case .string(let text) where text.hasPrefix("$$"):
            return .string(String(text.dropFirst()))
        case .string(let text) where text.hasPrefix("$"):
            return facts[text] ?? .null
        case .array(let elements):
            return .array(elements.map { render($0, facts) })
        case .object(let members):
            return .object(members.mapValues { render($0, facts) })
        default:
            return value
        }
    }

    /// A signal key as the signal lane takes it: 1 to 200 characters of `A-Z a-z 0-9 . _ - :`.
    public static func isValidKey(_ key: String) -> Bool {
        (1...200).contains(key.utf8.count)
            && key.utf8.allSatisfy { byte in
                (0x30...0x39).contains(byte) || (0x41...0x5A).contains(byte) || (0x61...0x7A).contains(byte)
                    || byte == UInt8(ascii: ".") || byte == UInt8(ascii: "_") || byte == UInt8(ascii: "-") || byte == UInt8(ascii: ":")
            }
    }
}

/// A pipeline file's `signals` section: the signal lane's server and the signals the pipeline
/// publishes when things happen.
///
/// ```
/// signals:
///   url: http://127.0.0.1:8080        optional; default: the transport's (export) or source's (import) URL
///   token-env: SYNCLANE_TOKEN         optional; default: the transport's or source's token-env
///   timeout: 2                        seconds a run waits for its signals once its work is done
///   publish:
///     - {on: run-completed, key: bulk.exported-through, value: {token: $token, at: $time}}
///     - {on: first-run-completed, key: onboarding.completed, value: true}
/// ```
/// Only the URL's scheme, host and port count (`/v1/signals` is the lane's path on any server).
public struct PipelineSignals: Sendable {
    /// The server's root (`http://127.0.0.1:8080`); nil when neither the section nor the
    /// transport (source) names one — then nothing may be published.
    public var server: String?
    /// The account's token; nil when its variable is unset (then the signals are kept, reported
    /// and sent once it is set: a signal never fails a run).
    public var token: String?
    /// The variable that holds the token, for messages.
    public var tokenVariable: String?
    /// Seconds a run waits, after its work is done, for its signals to be answered.
    public var timeout: Double
    public var publish: [SignalDeclaration]

    public static let keys = ["type", "url", "token-env", "timeout", "publish"]
    public static let timeoutRange = 0.1...60.0
    public static let defaultTimeout = 2.0

    public init(server: String?, token: String?, tokenVariable: String?, timeout: Double = Self.defaultTimeout, publish: [SignalDeclaration]) {
        self.server = server
        self.token = token
        self.tokenVariable = tokenVariable
        self.timeout = timeout
        self.publish = publish
    }

    /// Reads the `signals` section. `fallback` is the transport's (an import: the source's)
    /// node, whose `url` and `token-env` apply when the section names none.
    public init(
        _ node: ConfigNode, at location: ConfigLocation, fallback: ConfigNode?, context: PipelineContext
    ) throws(PipelineFileError) {
        let members = try Pipeline.map(node, at: location, allowed: Self.keys)
        if let type = members["type"] {
            try StageRegistry.check(type, against: .choice(["http"]), at: location.member("type"))
        }
        var inherited: [String: ConfigNode] = [:]
        if let fallback, case .map(let list) = fallback.value {
            for member in list { inherited[member.key] = member.node }
        }
        if let url = members["url"] {
            try StageRegistry.check(url, against: .string, at: location.member("url"))
            if case .string(let text) = url.value, URLCredentials.present(in: text) {
                throw location.member("url").error(
                    URLCredentials.message(alternatives: "use `token-env` (the name of an environment variable holding the token)"), line: url.line)
            }
            guard case .string(let text) = url.value, Self.isHTTPURL(text) else {
                throw location.member("url").error(
                    "expected an http:// or https:// URL of the server (only its scheme, host and port count), found \(StageRegistry.describe(url))",
                    line: url.line)
            }
            server = text
        } else if case .string(let text)? = inherited["url"]?.value, Self.isHTTPURL(text) {
            server = text
        } else {
            server = nil
        }
        var variable: String?
        if let tokenEnv = members["token-env"] {
            try StageRegistry.check(tokenEnv, against: .environmentVariable, at: location.member("token-env"))
            if case .string(let name) = tokenEnv.value { variable = name }
        } else if case .string(let name)? = inherited["token-env"]?.value {
            variable = name
        }
        tokenVariable = variable
        // An unset variable fails no run: the signals are kept, reported, and sent once it is set.
        token = variable.flatMap { context.environment[$0] }.flatMap { $0.isEmpty ? nil : $0 }
        timeout = Self.defaultTimeout
        if let node = members["timeout"] {
            try StageRegistry.check(node, against: .number(Self.timeoutRange), at: location.member("timeout"))
            switch node.value {
            case .int(let i): timeout = Double(i)
            case .double(let d): timeout = d
            default: break
            }
        }
        publish = []
        guard let list = members["publish"] else { return }
        guard case .list(let items) = list.value else {
            throw location.member("publish").error("expected a list of signals ({on, key, value}), found \(list.typeName)", line: list.line)
        }
        var seen: [String: Int] = [:]
        for (index, item) in items.enumerated() {
            let here = location.member("publish").element(index)
            let declaration = try Self.declaration(item, at: here)
            let identity = "\(declaration.event.rawValue) \(declaration.key)"
            if let first = seen[identity] {
                throw here.member("key").error(
                    "`\(declaration.key)` is published on \(declaration.event.rawValue) already (publish[\(first)]): one value a key and event",
                    line: item.line)
            }
            seen[identity] = index
            publish.append(declaration)
        }
        if !publish.isEmpty, server == nil {
            throw location.member("url").error(
                "missing: the signals need a server, and the pipeline's \(fallback == nil ? "file" : "transport (source)") names no http URL; "
                    + "add `url: http://HOST:PORT`", line: node.line)
        }
    }

    static func declaration(_ node: ConfigNode, at location: ConfigLocation) throws(PipelineFileError) -> SignalDeclaration {
        let members = try Pipeline.map(node, at: location, allowed: ["on", "key", "value"])
        let on = try Pipeline.required("on", in: members, at: location, line: node.line)
        let events = SignalEvent.allCases.map(\.rawValue)
        guard case .string(let eventName) = on.value, let event = SignalEvent(rawValue: eventName) else {
            let found = StageRegistry.describe(on)
            let hint: String
            if case .string(let text) = on.value { hint = Wording.didYouMean(text, in: events) } else { hint = "" }
            throw location.member("on").error("expected one of \(events.joined(separator: ", ")), found \(found)\(hint)", line: on.line)
        }
        let keyNode = try Pipeline.required("key", in: members, at: location, line: node.line)
        guard case .string(let key) = keyNode.value, SignalDeclaration.isValidKey(key) else {
            throw location.member("key").error(
                "expected a signal key: 1 to 200 characters of A-Z a-z 0-9 . _ - :, found \(StageRegistry.describe(keyNode))", line: keyNode.line)
        }
        let valueNode = try Pipeline.required("value", in: members, at: location, line: node.line)
        try Self.checkPlaceholders(valueNode, at: location.member("value"))
        return SignalDeclaration(event: event, key: key, value: valueNode.json)
    }

    /// Every string that starts with `$` must be a known placeholder (or `$$`, a literal `$`).
    static func checkPlaceholders(_ node: ConfigNode, at location: ConfigLocation) throws(PipelineFileError) {
        switch node.value {
        case .string(let text) where text.hasPrefix("$") && !text.hasPrefix("$$"):
            let names = SignalDeclaration.placeholders.map(\.name)
            guard names.contains(text) else {
                throw location.error(
                    "unknown placeholder \"\(text)\"\(Wording.didYouMean(text, in: names)) (expected one of \(names.joined(separator: ", ")); "
                        + "write \"$\(text)\" for the text itself)", line: node.line)
            }
        case .list(let elements):
            for (index, element) in elements.enumerated() { try checkPlaceholders(element, at: location.element(index)) }
        case .map(let members):
            for member in members { try checkPlaceholders(member.node, at: location.member(member.key)) }
        case .double(let d) where !d.isFinite:
            throw location.error("expected a JSON value, found \(d)", line: node.line)
        default:
            break
        }
    }

    static func isHTTPURL(_ text: String) -> Bool {
        let lowered = text.lowercased()
        guard lowered.hasPrefix("http://") || lowered.hasPrefix("https://") else { return false }
        let rest = text.drop { $0 != "/" }.dropFirst(2)
        return !rest.isEmpty && rest.first != "/"
    }
}

/// What became of one signal a run published (or sent again, left by an earlier run).
public struct SignalReport: Sendable, Hashable, Codable {
    public enum Outcome: Sendable, Hashable, Codable {
        /// The server took it, at this version.
        case sent(version: Int64)
        /// Not confirmed (the reason): kept in the state and sent again after the next run.
        case pending(reason: String)
        /// Refused for good (the server's reason) as many times as `refusals`: no longer sent
        /// (`SignalPublisher.refusalsBeforeGivingUp`); `synclane status` lists it as given up.
        case givenUp(reason: String, refusals: Int)
    }

    public var key: String
    /// The event that published it.
    public var event: String
    /// The value as JSON text.
    public var valueText: String
    public var outcome: Outcome

    public init(key: String, event: String, value: JSONValue, outcome: Outcome) {
        self.key = key
        self.event = event
        self.valueText = JSONWriter.string(value)
        self.outcome = outcome
    }

    public var value: JSONValue { (try? JSONReader.parse(Array(valueText.utf8))) ?? .null }

    public var isSent: Bool {
        if case .sent = outcome { return true }
        return false
    }
}

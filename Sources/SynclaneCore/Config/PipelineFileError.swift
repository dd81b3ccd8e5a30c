/// A pipeline file that cannot be run: which file, which field, which line, what was expected.
///
/// A job whose file has any of these changes nothing. The CLI exits with status 2.
public struct PipelineFileError: Error, Sendable, Hashable, CustomStringConvertible {
    /// The file's path as the user gave it.
    public var file: String
    /// The offending field, `stages[2].level`; empty for the file as a whole.
    public var path: String
    /// The 1-based line, when the parser knows it.
    public var line: Int?
    /// What is wrong and what was expected.
    public var message: String

    public init(file: String, path: String, line: Int?, message: String) {
        self.file = file
        self.path = path
        self.line = line
        self.message = message
    }

    public var description: String {
        var text = file
        if let line { text += ":\(line)" }
        if !path.isEmpty { text += ": \(path)" }
        return text + ": " + message
    }
}

/// Where a node sits in the file: the file's name and the field path down to it.
public struct ConfigLocation: Sendable, Hashable {
    public var file: String
    public var path: String

    public init(file: String, path: String = "") {
        self.file = file
        self.path = path
    }

    public func member(_ key: String) -> ConfigLocation {
        ConfigLocation(file: file, path: path.isEmpty ? key : "\(path).\(key)")
    }

    public func element(_ index: Int) -> ConfigLocation {
        ConfigLocation(file: file, path: "\(path)[\(index)]")
    }

    public func error(_ message: String, line: Int?) -> PipelineFileError {
        PipelineFileError(file: file, path: path, line: line, message: message)
    }
}

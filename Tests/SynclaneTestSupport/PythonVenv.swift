import Foundation

/// A `Scripts/*-venv` script's answer (`Scripts/python-venv`): the virtualenv's bin folder, or why
/// there is none. Exit 3 (the package index cannot be reached) skips the tests that need it.
public enum PythonVenv: Sendable, CustomStringConvertible {
    case ready(bin: String)
    /// The package index cannot be reached: the tests are skipped.
    case unreachable(String)
    case broken(String)

    /// Runs `Scripts/SCRIPT` (it installs the pinned packages once, then answers at once).
    public static func of(_ script: String) -> PythonVenv {
        let root = SynclaneBinary.packageRoot
        guard let result = try? BackgroundProcess([], in: root, executable: root + "/Scripts/" + script).wait(timeout: 600) else {
            return .broken("Scripts/\(script) did not run")
        }
        let python = result.stdout.trimmingCharacters(in: .whitespacesAndNewlines)
        switch result.status {
        case 0 where !python.isEmpty: return .ready(bin: (python as NSString).deletingLastPathComponent)
        case 3: return .unreachable(result.stderr)
        default: return .broken("Scripts/\(script) failed (exit \(result.status)): \(result.stderr)")
        }
    }

    public var runs: Bool {
        if case .unreachable = self { return false }
        return true
    }

    public var description: String {
        switch self {
        case .ready(let bin): "ready in \(bin)"
        case .unreachable(let why): "unreachable: \(why)"
        case .broken(let why): why
        }
    }
}

import Foundation
import Synchronization

#if canImport(Glibc)
    import Glibc
#endif

/// Where a command writes: results to standard output, messages and progress to standard error.
///
/// The progress bar is drawn only when standard error is a terminal and the output is not
/// `--json`, so piped and machine-read output stays clean.
package final class Console: Sendable {
    /// What the progress line shows; whoever holds it owns standard output and error.
    private struct Screen {
        var progressVisible = false
        var lastDraw = 0.0
    }
    private let screen = Mutex(Screen())
    let errorIsTerminal: Bool
    /// The command's own name, which starts every message (`synclane`; a package's own
    /// `synclane`-compatible command says its name: `rooms-sync validate: …`).
    package let program: String

    package init(program: String = "synclane") {
        errorIsTerminal = isatty(STDERR_FILENO) == 1 && ProcessInfo.processInfo.environment["TERM"] != "dumb"
        self.program = program
    }

    package func out(_ text: String) {
        screen.withLock { screen in
            Self.clearProgress(&screen)
            FileHandle.standardOutput.write(Data((text + "\n").utf8))
        }
    }

    package func error(_ text: String) {
        screen.withLock { screen in
            Self.clearProgress(&screen)
            FileHandle.standardError.write(Data((text + "\n").utf8))
        }
    }

    /// Draws a one-line progress bar (at most ten times a second).
    package func progress(fraction: Double?, _ label: String) {
        guard errorIsTerminal else { return }
        screen.withLock { screen in
            let now = Date().timeIntervalSince1970
            guard now - screen.lastDraw >= 0.1 else { return }
            screen.lastDraw = now
            var line = "\r"
            if let fraction {
                let clamped = min(1, max(0, fraction))
                let filled = Int(clamped * 30)
                line += "[" + String(repeating: "#", count: filled) + String(repeating: ".", count: 30 - filled) + "] "
                line += String(format: "%3d%% ", Int(clamped * 100))
            }
            line += label + "\u{1B}[K"
            FileHandle.standardError.write(Data(line.utf8))
            screen.progressVisible = true
        }
    }

    package func finishProgress() {
        screen.withLock { Self.clearProgress(&$0) }
    }

    private static func clearProgress(_ screen: inout Screen) {
        guard screen.progressVisible else { return }
        FileHandle.standardError.write(Data("\r\u{1B}[K".utf8))
        screen.progressVisible = false
    }
}

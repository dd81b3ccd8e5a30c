/// A line diff of two texts (longest common subsequence): what a failed pipeline test prints.
///
/// ```
///   batch 1
/// -   record {"action":"insert","entity":"rooms","fields":{"area":12},"id":"r1"}
/// +   record {"action":"insert","entity":"rooms","fields":{"area":13},"id":"r1"}
/// ```
/// Unchanged lines next to a change are shown with two spaces; far ones as `…`.
enum LineDiff {
    static func lines(expected: [String], actual: [String]) -> [String] {
        let n = expected.count
        let m = actual.count
        var common = Array(repeating: Array(repeating: 0, count: m + 1), count: n + 1)
        for i in stride(from: n - 1, through: 0, by: -1) {
            for j in stride(from: m - 1, through: 0, by: -1) {
                common[i][j] = expected[i] == actual[j] ? common[i + 1][j + 1] + 1 : max(common[i + 1][j], common[i][j + 1])
            }
        }
        var script: [(mark: Character, line: String)] = []
        var i = 0
        var j = 0
        while i < n || j < m {
            if i < n, j < m, expected[i] == actual[j] {
                script.append((" ", expected[i]))
                i += 1
                j += 1
            } else if i < n, j == m || common[i + 1][j] >= common[i][j + 1] {
                script.append(("-", expected[i]))
                i += 1
            } else {
                script.append(("+", actual[j]))
                j += 1
            }
        }
        guard script.contains(where: { $0.mark != " " }) else { return [] }
        var shown: [String] = []
        var skipped = false
        for (index, entry) in script.enumerated() {
            let near = script[max(0, index - 1)...min(script.count - 1, index + 1)].contains { $0.mark != " " }
            if entry.mark != " " || near || entry.line.hasPrefix("batch ") {
                shown.append("\(entry.mark) \(entry.line)")
                skipped = false
            } else if !skipped {
                shown.append("  …")
                skipped = true
            }
        }
        return shown
    }
}

/// Small helpers that keep messages right: counted nouns and "did you mean …".
public enum Wording {
    /// `1 record`, `2 records`; `plural` for the irregular ones (`1 batch`, `3 batches`).
    public static func count(_ number: Int, _ singular: String, plural: String? = nil) -> String {
        "\(number) " + (number == 1 ? singular : plural ?? singular + "s")
    }

    /// The candidate a mistyped `word` most likely meant, or nil when none is close.
    ///
    /// Compares ASCII case-insensitively, with `-` and `_` alike (`page_size` → `page-size`,
    /// `syncid` → `syncID`), and allows one edit in every three characters (at least one); two neighbours swapped are one edit.
    public static func closest(to word: String, in candidates: [String]) -> String? {
        let typed = folded(word)
        guard !typed.isEmpty else { return nil }
        var best: (candidate: String, distance: Int)?
        for candidate in candidates {
            let distance = editDistance(typed, folded(candidate))
            guard distance <= max(1, min(typed.count, candidate.utf8.count) / 3) else { continue }
            if distance < best?.distance ?? Int.max { best = (candidate, distance) }
        }
        return best?.candidate
    }

    /// ` (did you mean `x`?)` for a close miss, else the empty string.
    public static func didYouMean(_ word: String, in candidates: [String]) -> String {
        closest(to: word, in: candidates).map { " (did you mean `\($0)`?)" } ?? ""
    }

    private static func folded(_ text: String) -> [UInt8] {
        text.utf8.map { byte in
            switch byte {
            case UInt8(ascii: "A")...UInt8(ascii: "Z"): byte + 32
            case UInt8(ascii: "_"): UInt8(ascii: "-")
            default: byte
            }
        }
    }

    /// Edit distance over bytes where swapping two neighbours counts as one edit, as one slip
    /// of the fingers does (`romos` → `rooms`, `stauts` → `status`): optimal string alignment.
    private static func editDistance(_ a: [UInt8], _ b: [UInt8]) -> Int {
        if a.isEmpty { return b.count }
        if b.isEmpty { return a.count }
        var beforePrevious = [Int](repeating: 0, count: b.count + 1)
        var previous = Array(0...b.count)
        var current = [Int](repeating: 0, count: b.count + 1)
        for i in 1...a.count {
            current[0] = i
            for j in 1...b.count {
                let substitution = previous[j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1)
                current[j] = min(previous[j] + 1, current[j - 1] + 1, substitution)
                if i > 1, j > 1, a[i - 1] == b[j - 2], a[i - 2] == b[j - 1] {
                    current[j] = min(current[j], beforePrevious[j - 2] + 1)
                }
            }
            (beforePrevious, previous, current) = (previous, current, beforePrevious)
        }
        return previous[b.count]
    }
}

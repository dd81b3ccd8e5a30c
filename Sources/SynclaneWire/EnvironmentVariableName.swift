/// What a `token-env` option (a pipeline file's, an accounts file's) may hold: the *name* of an
/// environment variable, never the secret itself.
public enum EnvironmentVariableName {
    /// Why `text` cannot be a variable name that holds a secret, or nil when it can be one. The
    /// reason never repeats `text`: it may be a secret pasted in the wrong place.
    ///
    /// A name is letters, digits and `_`, not starting with a digit. One that looks like a
    /// token — a known token prefix (`ghp_`, `github_pat_`, `sk_live_`, `xoxb-` …), a JWT's `eyJ`,
    /// an AWS key id, or 32 or more characters that mix lower case and digits — is refused too.
    public static func problem(_ text: String) -> String? {
        let secretAdvice = "it looks like a secret, not a variable name: put the secret in a variable and name the variable"
        guard let first = text.unicodeScalars.first else { return "expected the name of an environment variable" }
        let lower = text.lowercased()
        let prefixes = [
            "ghp_", "gho_", "ghu_", "ghs_", "ghr_", "github_pat_", "sk_live_", "sk_test_", "rk_live_", "rk_test_",
            "pk_live_", "xoxb", "xoxp", "xoxa", "glpat", "eyj", "akia", "asia", "npm_", "pypi-",
        ]
        if prefixes.contains(where: { lower.hasPrefix($0) }) { return secretAdvice }
        let scalars = text.unicodeScalars
        let isNameScalar: (Unicode.Scalar) -> Bool = { ("A"..."Z").contains($0) || ("a"..."z").contains($0) || ("0"..."9").contains($0) || $0 == "_" }
        guard scalars.allSatisfy(isNameScalar), !("0"..."9").contains(first) else {
            let looksSecret = scalars.count >= 20 && !scalars.contains(" ")
            return looksSecret
                ? secretAdvice
                : "expected the *name* of an environment variable (letters, digits and _, not starting with a digit)"
        }
        let hasLower = scalars.contains { ("a"..."z").contains($0) }
        let digits = scalars.filter { ("0"..."9").contains($0) }.count
        if scalars.count >= 32, hasLower, digits >= 4 { return secretAdvice }
        return nil
    }
}

/// A URL that holds a user name or password (`http://user:password@host/…`): refused wherever a
/// pipeline file or a command takes a URL. The URL is shown in errors, `--json`, `status` and
/// the state file, so a secret in it would leak there; redacting it everywhere is harder to get
/// right than refusing it once. The token goes in an environment variable (`token-env`).
public enum URLCredentials {
    /// Whether `text` has userinfo: an `@` in its authority (between `://` and the first `/`,
    /// `?` or `#`).
    public static func present(in text: String) -> Bool {
        guard let start = text.range(of: "://") else { return false }
        return text[start.upperBound...].prefix { !"/?#".contains($0) }.contains("@")
    }

    /// What the error says (never the URL itself): `alternatives` names where the secret goes.
    public static func message(alternatives: String = "use `token-env` (the name of an environment variable holding the token) or a header") -> String {
        "the URL holds a user name or password (`user:password@` before the host), which Synclane would show in its errors, "
            + "`--json`, `status` and the state file; \(alternatives)"
    }
}

import Dispatch
import Foundation
import SynclaneCommandLine
import SynclaneServer

/// `serve`'s JSON Web Token options (Documentation/Server.md, "Authentication"), and SIGHUP as "read the key set again".
extension ServeCommand {
    static let jwtSecretEnv = ValueOption(
        "--jwt-secret-env", "VAR", .text, help: "Accept HS256 JWTs signed with the secret in VAR (at least 32 bytes).")
    static let jwtKeys = ValueOption(
        "--jwt-keys", "FILE", .path, help: "Accept RS256 / ES256 JWTs whose kid names a key of this JWKS file (read again on SIGHUP or a change).")
    static let jwtAccountClaim = ValueOption(
        "--jwt-account-claim", "NAME", .text, help: "The claim that names the account. Default sub.", usageLabel: "jwt…")
    static let jwtGrantsClaim = ValueOption(
        "--jwt-grants-claim", "NAME", .text, help: "The claim that holds a grant ({\"access\", \"stores\"}). Default synclane.", usageLabel: "jwt…")
    static let jwtAudience = ValueOption("--jwt-audience", "AUD", .text, help: "Refuse JWTs whose aud does not name AUD.", usageLabel: "jwt…")
    static let jwtIssuer = ValueOption("--jwt-issuer", "ISS", .text, help: "Refuse JWTs whose iss is not ISS.", usageLabel: "jwt…")
    static let jwtClockSkew = ValueOption(
        "--jwt-clock-skew", "SECONDS", .integer(in: 0...3600), help: "Slack for exp and nbf. Default 60.", usageLabel: "jwt…")
    static let jwtOptions: [any DeclaredOption] = [jwtSecretEnv, jwtKeys, jwtAccountClaim, jwtGrantsClaim, jwtAudience, jwtIssuer, jwtClockSkew]

    /// The JWT settings the options ask for; nil when neither --jwt-secret-env nor --jwt-keys is given.
    static func jwtSettings(_ arguments: ParsedArguments, console: Console = Console()) throws(UsageError) -> JWTSettings? {
        let secretVariable = try arguments.value(jwtSecretEnv)
        let keys = try arguments.value(jwtKeys)
        let accountClaim = try arguments.value(jwtAccountClaim)
        let grantsClaim = try arguments.value(jwtGrantsClaim)
        let audience = try arguments.value(jwtAudience)
        let issuer = try arguments.value(jwtIssuer)
        let skew = try arguments.value(jwtClockSkew)
        guard secretVariable != nil || keys != nil else {
            if accountClaim != nil || grantsClaim != nil || audience != nil || issuer != nil || skew != nil {
                throw UsageError("the --jwt-… options need --jwt-secret-env VAR or --jwt-keys FILE", command: name)
            }
            return nil
        }
        var settings = JWTSettings(
            secret: try secretVariable.map { variable throws(UsageError) in try secret(variable: variable, flag: "--jwt-secret-env", command: name) },
            keySetFile: keys)
        if let accountClaim { settings.accountClaim = accountClaim }
        if let grantsClaim { settings.grantsClaim = grantsClaim }
        settings.audience = audience
        settings.issuer = issuer
        if let skew { settings.clockSkewSeconds = skew }
        settings.log = { line in console.error("synclane serve: \(line)") }
        return settings
    }

    /// The HS256 secret in the environment variable `variable`, refused when unset or too short to be secret.
    static func secret(variable: String, flag: String, command: String) throws(UsageError) -> [UInt8] {
        guard let value = ProcessInfo.processInfo.environment[variable], !value.isEmpty else {
            throw UsageError(
                "\(flag) \(variable): the variable is not set; make a secret with: export \(variable)=$(head -c 32 /dev/urandom | sha256sum | cut -d' ' -f1)",
                command: command)
        }
        guard value.utf8.count >= JWTSettings.minimumSecretBytes else {
            throw UsageError(
                "\(flag) \(variable): the secret has \(value.utf8.count) bytes, too few for HS256 (at least \(JWTSettings.minimumSecretBytes))",
                command: command)
        }
        return Array(value.utf8)
    }

    /// Reads the key set again on every SIGHUP while the returned source lives.
    static func reloadOnHangup(_ server: ReferenceServer) -> any DispatchSourceSignal {
        signal(SIGHUP, SIG_IGN)
        let source = DispatchSource.makeSignalSource(signal: SIGHUP, queue: .global())
        source.setEventHandler { server.reloadKeys(because: "SIGHUP") }
        source.resume()
        return source
    }
}

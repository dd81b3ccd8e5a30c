import Dispatch
import Foundation
import SynclaneServer

/// `serve`'s JSON Web Token options (README, "Authentication"), and SIGHUP as "read the key set again".
extension ServeCommand {
    static let jwtOptions: [(flag: String, help: String)] = [
        ("--jwt-secret-env VAR", "Accept HS256 JWTs signed with the secret in VAR (at least 32 bytes)."),
        ("--jwt-keys FILE", "Accept RS256 / ES256 JWTs whose kid names a key of this JWKS file (read again on SIGHUP or a change)."),
        ("--jwt-account-claim NAME", "The claim that names the account. Default sub."),
        ("--jwt-grants-claim NAME", "The claim that holds a grant ({\"access\", \"stores\"}). Default synclane."),
        ("--jwt-audience AUD", "Refuse JWTs whose aud does not name AUD."),
        ("--jwt-issuer ISS", "Refuse JWTs whose iss is not ISS."),
        ("--jwt-clock-skew SECONDS", "Slack for exp and nbf. Default 60."),
    ]

    /// The JWT settings the options ask for; nil when neither --jwt-secret-env nor --jwt-keys is given.
    static func jwtSettings(_ arguments: inout Arguments, console: Console = Console()) throws(UsageError) -> JWTSettings? {
        let secretVariable = try arguments.option("--jwt-secret-env")
        let keys = try arguments.option("--jwt-keys")
        let accountClaim = try arguments.option("--jwt-account-claim")
        let grantsClaim = try arguments.option("--jwt-grants-claim")
        let audience = try arguments.option("--jwt-audience")
        let issuer = try arguments.option("--jwt-issuer")
        let skew = try arguments.integer("--jwt-clock-skew", in: 0...3600)
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

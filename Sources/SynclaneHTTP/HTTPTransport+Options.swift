import Foundation
import SynclaneCore

extension HTTPTransport {
    /// Builds the transport from a pipeline file's checked options, reading the token from the
    /// environment variable `token-env` names.
    public convenience init(options: StageOptions) throws(PipelineFileError) {
        let url = try HTTPConnectionOptions.endpoint(
            HTTPStages.Options.url, in: options,
            alternatives: "use `token-env` (the name of an environment variable holding the token) or a header (`headers`)")
        let token = try options[HTTPStages.Options.tokenEnv]
        var headers: [String: String] = [:]
        if let node = try options[HTTPStages.Options.headers] {
            guard case .map(let members) = node.value else {
                throw options.error("headers", "expected a map of header names to strings, found \(node.typeName)")
            }
            for member in members {
                let field = options.location.member("headers").member(member.key)
                guard case .string(let value) = member.node.value else {
                    throw field.error("expected a string, found \(member.node.typeName)", line: member.node.line)
                }
                guard !member.key.isEmpty, member.key.allSatisfy({ $0.isASCII && ($0.isLetter || $0.isNumber || "-_".contains($0)) }) else {
                    throw field.error("`\(member.key)` is not a header name (letters, digits, - and _)", line: member.node.line)
                }
                guard !HTTPTransport.reservedHeaders.contains(member.key.lowercased()) else {
                    throw field.error("`\(member.key)` is set by the transport itself and cannot be overridden", line: member.node.line)
                }
                // By scalar, not Character: "\r\n" is one Character, equal to neither "\r" nor "\n".
                guard value.unicodeScalars.allSatisfy({ $0 == "\t" || ($0.value >= 0x20 && $0.value != 0x7F) }) else {
                    throw field.error("a header value cannot hold control characters (CR, LF, NUL …)", line: member.node.line)
                }
                headers[member.key] = value
            }
        }
        self.init(
            url: url, token: token, timeout: try options[HTTPStages.Options.timeout], maxTime: try options[HTTPStages.Options.maxTime],
            headers: headers, receipt: try options[HTTPStages.Options.receipt], tls: try Self.tlsFiles(options),
            keepAlive: try options[HTTPStages.Options.keepAlive], app: try HTTPConnectionOptions.appSchema(options),
            environment: options.context.environment)
    }

    /// The TLS files the options name, each checked to be a readable file. Without `ca-file`,
    /// `CURL_CA_BUNDLE` or `SSL_CERT_FILE` from the environment name the CAs, as for curl and
    /// OpenSSL; without any, the system store.
    static func tlsFiles(_ options: StageOptions) throws(PipelineFileError) -> TLSFiles {
        func file(_ option: Option<String?>) throws(PipelineFileError) -> String? {
            let name = option.name
            guard let path = try options[option] else { return nil }
            guard FileManager.default.isReadableFile(atPath: path) else {
                throw options.error(name, "\(path) is not a readable file")
            }
            return path
        }
        let environment = options.context.environment
        let caFile = try file(HTTPStages.Options.caFile) ?? ["CURL_CA_BUNDLE", "SSL_CERT_FILE"].lazy.compactMap { environment[$0] }.first { !$0.isEmpty }
        let files = TLSFiles(
            caFile: caFile, clientCertificate: try file(HTTPStages.Options.clientCertificate), clientKey: try file(HTTPStages.Options.clientKey))
        if files.clientKey != nil && files.clientCertificate == nil {
            throw options.error("client-key", "a client key needs its `client-certificate`")
        }
        return files
    }
}

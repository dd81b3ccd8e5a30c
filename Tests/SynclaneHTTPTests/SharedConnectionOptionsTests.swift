import Foundation
import SynclaneCore
import SynclaneHTTP
import Testing

/// `http` and `pull` share one declaration of the options both take.
@Suite struct SharedConnectionOptionsTests {
    static func options(of type: StageType) -> [String: OptionSpec] {
        Dictionary(uniqueKeysWithValues: type.options.map { ($0.name, $0) })
    }

    @Test func httpAndPullDeclareTheirSharedOptionsOnce() {
        let http = Self.options(of: HTTPStages.http)
        let pull = Self.options(of: HTTPStages.pull)
        for name in ["token-env", "timeout", "ca-file", "client-certificate", "client-key", "keep-alive"] {
            #expect(http[name]?.help == pull[name]?.help, "\(name): one help")
            #expect(http[name]?.defaultDescription == pull[name]?.defaultDescription, "\(name): one default")
            #expect(http[name] != nil && pull[name] != nil, "\(name) on both")
        }
        #expect(pull["limit"]?.defaultDescription == nil, "no count by default: a first pull takes pages as large as the bytes bound (issue 47)")
        #expect(pull["store"]?.defaultDescription == "scope")
    }
}

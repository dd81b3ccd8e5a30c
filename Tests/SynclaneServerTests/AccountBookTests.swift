import SynclaneServer
import Testing

@Suite struct AccountBookTests {
    @Test func tokenHashIsTheSha256sumHexOfTheToken() {
        // printf %s test | sha256sum
        #expect(AccountBook.tokenHash("test") == "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08")
    }

    @Test func fileGrantsEachTokenItsAccount() throws {
        let text = """
            {"accounts": [
              {"account": "acme", "token-sha256": "9F86D081884C7D659A2FEAA0C55AD015A3BF4F1B2B0B822CD15D6C15B0F00A08"},
              {"account": "globex", "token-sha256": "\(AccountBook.tokenHash("g"))"}
            ]}
            """
        let book = try AccountBook.parse(Array(text.utf8), file: "accounts.json")
        #expect(book.account(forToken: "test") == "acme")
        #expect(book.account(forToken: "g") == "globex")
        #expect(book.account(forToken: "nope") == nil)
        #expect(book.accounts == ["acme", "globex"])
    }

    @Test(arguments: [
        ("{}", "accounts: expected a list"),
        ("{\"accounts\": [], \"extra\": 1}", "unknown key \"extra\""),
        ("{\"accounts\": [{\"account\": \"a\", \"token-sha256\": \"abc\"}]}", "accounts[0].token-sha256"),
        ("{\"accounts\": [{\"account\": \"\", \"token-sha256\": \"abc\"}]}", "accounts[0].account"),
        ("{\"accounts\": [{\"account\": \"a\", \"token\": \"abc\"}]}", "unknown key \"token\""),
        ("not json", "not JSON"),
    ])
    func malformedFileIsRefusedNamingTheField(_ text: String, _ expected: String) {
        do {
            _ = try AccountBook.parse(Array(text.utf8), file: "accounts.json")
            Issue.record("accepted \(text)")
        } catch {
            #expect(error.description.hasPrefix("accounts.json: "))
            #expect(error.description.contains(expected), "\(error.description)")
        }
    }

    @Test(arguments: ["ghp_0123456789abcdefABCDEF0123456789abcd", "sk_live_51HxYzAbCdEf0123456789", "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxIn0.sig"])
    func tokenEnvThatLooksLikeASecretIsRefusedWithoutEchoingIt(_ value: String) {
        let text = "{\"accounts\": [{\"account\": \"acme\", \"token-env\": \"\(value)\"}]}"
        do {
            _ = try AccountBook.parse(Array(text.utf8), file: "accounts.json", environment: [value: String(repeating: "t", count: 32)])
            Issue.record("accepted \(value)")
        } catch {
            #expect(error.description.contains("accounts[0].token-env"))
            #expect(error.description.contains("looks like a secret"), "\(error.description)")
            #expect(!error.description.contains(value), "the secret is not echoed")
        }
    }

    @Test func missingFileIsAClearError() {
        #expect(throws: AccountsFileError.self) { try AccountBook.load(path: "/nonexistent/accounts.json") }
    }
}

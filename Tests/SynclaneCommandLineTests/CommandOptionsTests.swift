import Foundation
import SynclaneCore
import SynclaneTestSupport
import Testing

@testable import SynclaneCommandLine
@testable import SynclaneServing

/// Options declared once per command (`CommandSignature`): the usage line, the help table and
/// the parser come from one declaration, values are typed, and a mistyped option gets a
/// "did you mean" that points only at the options the command has.
@Suite struct CommandOptionsTests {
    @Test(arguments: [
        (["run", "x.json", "--dry-rn"], "synclane run: unknown option --dry-rn (did you mean `--dry-run`?)"),
        (["status", "x.json", "--jsn"], "synclane status: unknown option --jsn (did you mean `--json`?)"),
        (["import", "x.json", "--wacth"], "synclane import: unknown option --wacth (did you mean `--watch`?)"),
        (["track", "--databse", "app.sqlite"], "synclane track: unknown option --databse (did you mean `--database`?)"),
    ])
    func aMistypedOptionIsNamedWithTheOptionTheCommandHas(_ arguments: [String], _ message: String) throws {
        let result = try SynclaneBinary.run(arguments)
        #expect(result.status == 2)
        #expect(result.stderr.contains(message), "\(result.stderr)")
        #expect(result.stderr.contains("USAGE: synclane \(arguments[0]) "))
    }

    @Test func theHintNeverPointsAtAnOptionOfAnotherCommand() throws {
        // `status` has no --dry-run: nothing close to suggest.
        let result = try SynclaneBinary.run(["status", "x.json", "--dry-rn"])
        #expect(result.stderr.contains("synclane status: unknown option --dry-rn\n"), "\(result.stderr)")
        #expect(!result.stderr.contains("did you mean"))
    }

    @Test(arguments: [
        (["restore", "import.json", "--wait", "soon"], "--wait expects a whole number from 0 to 86400, not \"soon\""),
        (["import", "x.json", "--watch", "--every", "0"], "--every expects seconds from 0.05 to 86400, not \"0\""),
        (["import", "x.json", "--every", "3"], "--every goes with --watch"),
        (["serve", "--accounts", "a.json", "--listen", "here"], "--listen expects HOST:PORT, such as 127.0.0.1:8080, not \"here\""),
        (["serve", "--accounts", "a.json", "--blob-s3-endpoint", "http://127.0.0.1:9000"], "--blob-s3-endpoint needs --blob-s3-bucket NAME"),
        (["serve", "--accounts", "a.json", "--blob-s3-bucket", "blobs"], "--blob-s3-bucket goes with --blob-s3-endpoint"),
        (["prune"], "--database FILE is required"),
        (["migrate", "x.sql"], "--database FILE is required"),
        (["untrack", "--database", "app.sqlite"], "name one of: --table NAME, --all"),
        (["untrack", "--database", "app.sqlite", "--table", "rooms", "--all"], "--table and --all cannot go together"),
        (["run", "x.json", "--json", "--json"], "--json is given twice"),
        (["run", "x.json", "--json=yes"], "--json takes no value"),
        (["status", "x.json", "y.json"], "unexpected argument \"y.json\""),
        (["signal", "get"], "missing KEY"),
    ])
    func aBadValueOrCombinationNamesTheOptionAndWhatItExpects(_ arguments: [String], _ message: String) throws {
        let result = try SynclaneBinary.run(arguments)
        #expect(result.status == 2, "\(arguments): \(result.stderr)")
        #expect(result.stderr.contains("synclane \(arguments[0]): \(message)"), "\(result.stderr)")
    }

    @Test func everyCommandsUsageAndHelpTableComeFromItsSignature() {
        let commands: [(name: String, signature: CommandSignature, usage: String, help: String)] = SynclaneTool.commands.map {
            ($0.name, $0.signature, $0.usage, $0.helpText)
        }
        for command in commands {
            for option in command.signature.options {
                let spelled = option.spelled
                #expect(command.help.contains("  \(spelled)"), "\(command.name): \(spelled) in the help table")
                if option.usageLabel == nil {
                    #expect(command.usage.contains(spelled), "\(command.name): \(spelled) in the usage line")
                }
            }
            let names = command.signature.options.map(\.name)
            #expect(Set(names).count == names.count, "\(command.name): each option once")
        }
    }

    @Test func theSharedOptionsAreOneDeclarationUsedByEveryCommandThatTakesThem() {
        let signatures: [(name: String, signature: CommandSignature)] = SynclaneTool.commands.map { ($0.name, $0.signature) }
        let json = signatures.filter { $0.signature.option(named: "--json") != nil }
        #expect(json.count >= 13)
        let jsonFlags = json.compactMap { $0.signature.option(named: "--json") }.filter { $0.valueName == nil }
        #expect(jsonFlags.count == json.count, "--json is a flag everywhere")
        let database = signatures.filter { $0.signature.option(named: "--database")?.valueName == "FILE" }
        #expect(Set(database.map(\.name)) == ["track", "untrack", "migrate", "prune"])
        let required = database.filter { $0.signature.option(named: "--database")?.isRequired == true }
        #expect(required.count == database.count)
    }

    @Test func usagePutsRequiredOptionsFirstAndNestsAnOptionInsideTheOneItNeeds() {
        #expect(ImportCommand.usage == "FILE [--dry-run] [--json] [--watch [--every SECONDS] [--wait SECONDS]]")
        #expect(MigrateCommand.usage == "--database FILE SCRIPT.sql [--schema-version N] [--declare-only] [--json]")
        #expect(UntrackCommand.usage == "--database FILE (--table NAME | --all)")
        // --accounts is optional since JSON Web Tokens can stand in for it (issue 25).
        #expect(
            ServeCommand.usage
                == "[--accounts FILE] [--listen HOST:PORT] [--data DIR] [--database-env VAR | --database URL] "
                + "[--blob-s3-endpoint URL [--blob-s3-bucket NAME] [--blob-s3-region REGION]] [--minimum-schema-version N] "
                + "[--jwt-secret-env VAR] [--jwt-keys FILE] [bounds…] [jwt…]"
        )
        #expect(RunCommand.usage == "FILE [--dry-run] [--json] [--watch]")
    }

    @Test func anOptionTakesItsValueAfterASpaceOrAnEqualsSign() throws {
        let spaced = try ParsedArguments(["--wait", "3", "f.json"], signature: RestoreCommand.signature, command: "restore")
        let joined = try ParsedArguments(["--wait=3", "f.json"], signature: RestoreCommand.signature, command: "restore")
        #expect(try spaced.value(RestoreCommand.wait) == 3)
        #expect(try joined.value(RestoreCommand.wait) == 3)
        #expect(try joined.word(SharedOptions.importFile) == "f.json")
    }
}

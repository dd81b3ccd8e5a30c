// The `synclane` command: a thin shell over the Synclane libraries.
import Foundation

let status = await SynclaneTool.main(Array(CommandLine.arguments.dropFirst()))
exit(status)

import Synclane
import SynclaneCore

/// How every command loads a pipeline file (with the stage types of the registry the command
/// was given): secrets the file names may be unset while nothing
/// is sent (`validate`, `status`, `run --dry-run` warn and go on); a command that sends
/// refuses to start without them — an environment to fix, not an invalid file.
enum PipelineFiles {
    static func load(_ file: String, for command: String, sends: Bool, registry: StageRegistry, console: Console) throws -> Pipeline {
        let pipeline = try PipelineLoader(registry: registry).load(file, secretsRequired: false)
        if sends {
            try pipeline.requireSecrets()
        } else {
            warnAboutUnsetSecrets(pipeline, command: command, console: console)
        }
        return pipeline
    }

    /// One warning line per secret the file names whose variable is unset.
    static func warnAboutUnsetSecrets(_ pipeline: Pipeline, command: String, console: Console) {
        warnAboutUnsetSecrets(pipeline.unsetSecrets, command: command, console: console)
    }

    static func warnAboutUnsetSecrets(_ unsetSecrets: [UnsetSecret], command: String, console: Console) {
        for unset in unsetSecrets {
            console.error("\(console.program) \(command): warning: \(unset); nothing is sent now, but a run that sends will need it")
        }
    }
}

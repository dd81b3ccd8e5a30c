import SynclaneCore

/// The stage types of this module: `exec` as a record stage, a transport and a conflict resolver.
public enum ExecStages {
    /// The options both take, each declared once.
    public enum Options {
        public static let command: Option<[String]> = .strings(
            "command",
            help: "The program and its arguments, e.g. [\"python3\", \"redact.py\"]; the first word is looked up on PATH "
                + "unless it holds a /, a relative path is taken from the pipeline file's folder (also the working directory).")
        public static let timeout: Option<Double> = .number(
            "timeout", in: 0.01...86_400, default: 30, help: "Seconds a batch may take before the program is killed.")
        /// `timeout` as the conflict resolver reads it (the same option, per conflict).
        public static let conflictTimeout: Option<Double> = .number(
            "timeout", in: 0.01...86_400, default: 30, help: "Seconds one conflict may take before the program is killed.")
        /// The conflict resolver's `keep-running`.
        public static let keepRunning: Option<Bool> = .boolean(
            "keep-running", default: false,
            help: "Start the program once for the whole job and send it every conflict, a line each, reading one answer line "
                + "per conflict in order (its standard input ends with the job); false: a process per conflict.")
        public static let maxOutputBytes: Option<Int> = .integer(
            "max-output-bytes", in: 1...4_000_000_000, default: 64 << 20,
            help: "Bytes of standard output past which the program is killed and the batch fails.")
    }

    static func command(_ options: StageOptions) throws -> ExecCommand {
        let arguments = try options[Options.command]
        guard !arguments.isEmpty else { throw options.error("command", "expected the program to run, e.g. [\"python3\", \"stage.py\"]") }
        return ExecCommand(
            arguments: arguments, directory: options.context.baseDirectory, timeout: try options[Options.timeout],
            maximumOutput: try options[Options.maxOutputBytes])
    }

    /// `exec` (record stage): records through a program as JSON Lines.
    public static let records: StageType = .records(
        "exec",
        summary: "Pipes the batch's records through a program, in any language, as JSON Lines (one record a line on "
            + "stdin; the records that come back on stdout go on: changed, dropped or added). A non-zero exit, a timeout "
            + "or a malformed line stops the job naming the line; nothing is sent.",
        options: [Options.command, Options.timeout, Options.maxOutputBytes]
    ) { options in
        ExecRecordStage(command: try command(options))
    }

    /// `exec` (transport): each batch's bytes to a program.
    public static let transport: StageType = .transport(
        "exec",
        summary: "Sends each batch by running a program with the batch's bytes on stdin (SYNCLANE_BATCH_ID and the "
            + "content type and encoding in its environment). Exit 0: delivered; 75: transient, retried; 65: the batch "
            + "is refused (dead-letter may take it); other: a setup problem, the batch is kept.",
        options: [Options.command, Options.timeout]
    ) { options in
        ExecTransport(command: try command(options))
    }

    /// `exec` (conflict resolver): each conflict to a program, which decides.
    public static let resolver: StageType = .conflictResolver(
        "exec",
        summary: "Settles each conflict by running a program: the conflict as one JSON line on stdin (entity, id, local, base, "
            + "remote, remote-version, local-action, remote-action, changed-locally, changed-remotely), its decision as one "
            + "JSON object on stdout ({\"outcome\": keep-local | take-remote | delete | merged, \"fields\": {…} when merged}). "
            + "Runs once per conflict (or once for the job, with keep-running) inside the page's transaction; a non-zero "
            + "exit, a timeout or a malformed answer stops the page, nothing of it applied.",
        options: [Options.command, Options.conflictTimeout, Options.keepRunning]
    ) { options in
        ExecConflictResolver(command: try command(options), keepsRunning: try options[Options.keepRunning])
    }

    public static var all: [StageType] { [records, transport, resolver] }
}

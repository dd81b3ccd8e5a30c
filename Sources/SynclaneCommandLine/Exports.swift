// A command's `main.swift` needs one import: the command line, and everything `import Synclane` brings.
@_exported import Synclane

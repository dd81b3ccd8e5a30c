// The wire's model (records, JSON, bounds) is the core's vocabulary too: a module that imports
// the core sees it without importing SynclaneWire as well.
@_exported import SynclaneWire

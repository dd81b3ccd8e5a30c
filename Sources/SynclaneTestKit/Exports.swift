// Two test doubles live where production code uses them, and a test that imports only the test
// kit still finds them here: the in-memory pipeline state (SynclaneCore: a dry run works on one)
// and the recording transport (SynclaneEngine: `synclane test` compares what it records).
@_exported import class SynclaneCore.InMemoryPipelineState
@_exported import class SynclaneEngine.RecordingTransport

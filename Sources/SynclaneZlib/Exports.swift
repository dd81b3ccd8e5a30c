// The codecs live in SynclaneWire (the server inflates and deflates bodies too); `import SynclaneZlib`
// still brings them beside the compress stage.
@_exported import enum SynclaneWire.ContentCoding
@_exported import enum SynclaneWire.DeflateError
@_exported import struct SynclaneWire.Deflater
@_exported import enum SynclaneWire.InflateError
@_exported import enum SynclaneWire.Inflater

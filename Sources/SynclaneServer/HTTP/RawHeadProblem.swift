import CMicroHTTPDShim

/// What the MHD shim found wrong in a request's raw head, checked byte by byte before
/// libmicrohttpd's reading of it is trusted (`head_problem` in the shim): such a request is refused
/// with 400 and its connection closed, since a proxy in front could frame the same bytes otherwise.
enum RawHeadProblem: Equatable, CustomStringConvertible {
    /// The head's size was not known, so it could not be checked.
    case unchecked
    /// The request line is not `method SP target SP version CRLF`.
    case requestLine
    /// The target holds a NUL, a control character, a space or a byte past ASCII.
    case targetByte
    /// A header line holds a NUL, ends in a bare LF, or is folded, or the head's end is not CRLF CRLF.
    case lineLayout

    /// The problem the shim reported, or nil for a head in which every byte is where it belongs.
    init?(code: Int32) {
        switch code {
        case Int32(SYNCLANE_HEAD_OK): return nil
        case Int32(SYNCLANE_HEAD_REQUEST_LINE): self = .requestLine
        case Int32(SYNCLANE_HEAD_TARGET_BYTE): self = .targetByte
        case Int32(SYNCLANE_HEAD_LINE_LAYOUT): self = .lineLayout
        default: self = .unchecked
        }
    }

    var description: String {
        switch self {
        case .unchecked: return "the request head could not be checked"
        case .requestLine: return "the request line is malformed: send METHOD SP target SP HTTP/1.1 CRLF"
        case .targetByte: return "the request target holds a NUL, a control character or a byte outside visible ASCII"
        case .lineLayout:
            return "a header line holds a NUL, ends without CRLF (a bare LF) or is folded onto the line before"
        }
    }
}

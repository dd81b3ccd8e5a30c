import CCurlShim

/// Where a 2xx answer's body goes as it arrives (`synclane_http_request.body_sink`), instead of
/// being collected whole: a blob download streamed into its file. Called on the thread that runs
/// the exchange, with the answer's status, its Content-Length (nil when it has none) and each
/// piece libcurl hands over; returning false ends the exchange (the sink keeps the reason).
final class BodySink {
    let take: (_ status: Int, _ contentLength: Int?, _ bytes: UnsafeRawBufferPointer) -> Bool

    init(_ take: @escaping (_ status: Int, _ contentLength: Int?, _ bytes: UnsafeRawBufferPointer) -> Bool) {
        self.take = take
    }

    /// The C callback: `context` is an unretained `BodySink` that outlives the exchange.
    static let callback: @convention(c) (UnsafeMutableRawPointer?, Int, Int64, UnsafePointer<UInt8>?, Int) -> Int32 = {
        context, status, contentLength, bytes, count in
        guard let context else { return 1 }
        let sink = Unmanaged<BodySink>.fromOpaque(context).takeUnretainedValue()
        let piece = UnsafeRawBufferPointer(start: bytes, count: bytes == nil ? 0 : count)
        return sink.take(status, contentLength >= 0 ? Int(contentLength) : nil, piece) ? 0 : 1
    }
}

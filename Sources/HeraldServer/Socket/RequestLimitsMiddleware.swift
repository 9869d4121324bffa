import Hummingbird

/// Refuses requests whose line or headers are longer than any client of the
/// socket needs: `414` for the target, `431` for the headers, before any
/// route parses them. (Past 80 KiB the HTTP parser itself answers `400`.)
struct RequestLimitsMiddleware<Context: RequestContext>: RouterMiddleware {
    /// The longest request target: a filter at its documented limits fits.
    static var maximumTargetBytes: Int { 8192 }
    /// The most header bytes (names and values) and header fields.
    static var maximumHeaderBytes: Int { 16_384 }
    static var maximumHeaderFields: Int { 100 }

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        if request.uri.description.utf8.count > Self.maximumTargetBytes {
            return refusal(.uriTooLong, "request_target_too_long", "the request target is longer than \(Self.maximumTargetBytes) bytes")
        }
        var size = 0
        var fields = 0
        for field in request.headers {
            size += field.name.rawName.utf8.count + field.value.utf8.count
            fields += 1
        }
        if size > Self.maximumHeaderBytes || fields > Self.maximumHeaderFields {
            return refusal(
                .init(code: 431, reasonPhrase: "Request Header Fields Too Large"), "headers_too_large",
                "the headers are longer than \(Self.maximumHeaderBytes) bytes or more than \(Self.maximumHeaderFields) fields"
            )
        }
        return try await next(request, context)
    }

    private func refusal(_ status: HTTPResponse.Status, _ code: String, _ message: String) -> Response {
        var headers = HTTPFields()
        headers[.contentType] = "application/json"
        headers[.connection] = "close"
        return Response(status: status, headers: headers, body: .init(byteBuffer: ByteBuffer(string: #"{"error":"\#(code)","message":"\#(message)"}"# + "\n")))
    }
}

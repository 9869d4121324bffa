import Foundation
package import HTTPTypes
package import Hummingbird
package import NIOCore

extension Response {
    /// `body` as JSON with sorted keys and a final newline.
    package static func json(_ status: HTTPResponse.Status, _ body: some Encodable) -> Response {
        var headers = HTTPFields()
        headers[.contentType] = "application/json"
        return Response(status: status, headers: headers, body: .init(byteBuffer: jsonBuffer(body)))
    }

    package static func jsonBuffer(_ body: some Encodable) -> ByteBuffer {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys]
        let data = (try? encoder.encode(body)) ?? Data("{}".utf8)
        return ByteBuffer(bytes: data + [UInt8(ascii: "\n")])
    }
}

import Herald
import Hummingbird
import NIOCore

extension DaemonMetrics {
    /// `GET /metrics`: the Prometheus text format, version 0.0.4.
    func response(journal: DaemonStatistics.Journal?) -> Response {
        var headers = HTTPFields()
        headers[.contentType] = "text/plain; version=0.0.4; charset=utf-8"
        return Response(status: .ok, headers: headers, body: .init(byteBuffer: ByteBuffer(bytes: render(journal: journal))))
    }
}

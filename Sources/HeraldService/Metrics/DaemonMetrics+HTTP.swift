package import Herald
public import HeraldOutput
package import Hummingbird
import NIOCore

extension DaemonMetrics {
    /// `GET /metrics`: the Prometheus text format, version 0.0.4.
    /// - Parameter scope: series labelled with a table it does not cover are left out.
    package func response(journal: DaemonStatistics.Journal?, visibleTo scope: AccessScope = .everything) -> Response {
        var headers = HTTPFields()
        headers[.contentType] = "text/plain; version=0.0.4; charset=utf-8"
        var text = render(journal: journal)
        if scope != .everything { text = Self.series(of: text, visibleTo: scope) }
        return Response(status: .ok, headers: headers, body: .init(byteBuffer: ByteBuffer(bytes: text)))
    }

    /// The text without the samples whose `schema` and `table` labels name a table `scope` does not cover.
    static func series(of text: [UInt8], visibleTo scope: AccessScope) -> [UInt8] {
        var kept: [UInt8] = []
        kept.reserveCapacity(text.count)
        for line in text.split(separator: UInt8(ascii: "\n"), omittingEmptySubsequences: false).dropLast() {
            if line.first != UInt8(ascii: "#"), let labels = labels(of: line), let schema = labels["schema"], let table = labels["table"],
               !scope.covers(TableName(schema: schema, name: table)) {
                continue
            }
            kept += line
            kept.append(UInt8(ascii: "\n"))
        }
        return kept
    }

    /// The labels of one sample line (`name{a="x",b="y\\"z"} 1`), unescaped; nil without labels.
    static func labels(of line: ArraySlice<UInt8>) -> [String: String]? {
        guard let open = line.firstIndex(of: UInt8(ascii: "{")) else { return nil }
        var labels: [String: String] = [:]
        var index = line.index(after: open)
        while index < line.endIndex, line[index] != UInt8(ascii: "}") {
            guard let equals = line[index...].firstIndex(of: UInt8(ascii: "=")), line.index(after: equals) < line.endIndex,
                  line[line.index(after: equals)] == UInt8(ascii: "\"") else { return nil }
            let name = String(decoding: line[index..<equals], as: UTF8.self)
            var value: [UInt8] = []
            index = line.index(equals, offsetBy: 2)
            while index < line.endIndex, line[index] != UInt8(ascii: "\"") {
                if line[index] == UInt8(ascii: "\\"), line.index(after: index) < line.endIndex {
                    index = line.index(after: index)
                    value.append(line[index] == UInt8(ascii: "n") ? UInt8(ascii: "\n") : line[index])
                } else {
                    value.append(line[index])
                }
                index = line.index(after: index)
            }
            guard index < line.endIndex else { return nil }
            labels[name] = String(decoding: value, as: UTF8.self)
            index = line.index(after: index)
            if index < line.endIndex, line[index] == UInt8(ascii: ",") { index = line.index(after: index) }
        }
        return labels
    }
}

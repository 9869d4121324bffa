public import Configuration

/// A size in bytes, written `1048576`, `512K`, `100M` or `1G` (powers of 1024).
public struct ByteSize: Sendable, Hashable, CustomStringConvertible, ExpressibleByConfigString {
    public let bytes: Int64
    public let description: String

    public init?(configString text: String) {
        let units: [Character: Int64] = ["K": 1 << 10, "M": 1 << 20, "G": 1 << 30]
        let scale = text.last.flatMap { units[Character($0.uppercased())] }
        guard let value = Int64(scale == nil ? Substring(text) : text.dropLast()), value >= 0 else { return nil }
        let (bytes, overflow) = value.multipliedReportingOverflow(by: scale ?? 1)
        guard !overflow else { return nil }
        self.bytes = bytes
        description = text
    }
}

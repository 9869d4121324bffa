/// A payload too large for one message carried in consecutive messages,
/// each with `Pgherald-Part: I/N`: a NATS server closes the connection of a
/// client that publishes more than its `max_payload`, headers included, and a
/// row or a database broadcast can be any size.
public enum NATSMessageParts {
    /// The header that numbers a part, from `1/N` to `N/N`.
    public static let header = "Pgherald-Part"

    /// One message of the parts: the headers to add, and its share of the payload.
    public struct Part: Sendable, Equatable {
        /// Nats-Msg-Id: the payload's own with `/I` after it, so that JetStream deduplicates each part.
        public var messageID: String
        public var headers: [(name: String, value: String)]
        public var payload: ArraySlice<UInt8>

        public static func == (left: Part, right: Part) -> Bool {
            left.messageID == right.messageID && left.payload == right.payload
                && left.headers.map(\.name) == right.headers.map(\.name) && left.headers.map(\.value) == right.headers.map(\.value)
        }
    }

    /// `payload` as the messages that carry it under `maximumPayload`: one,
    /// as it is, when it fits with `headers` and `messageID`; otherwise as
    /// many parts as it takes, each with `headers` and its `Pgherald-Part`.
    public static func split(
        _ payload: [UInt8], messageID: String, headers: [(name: String, value: String)], maximumPayload: Int
    ) -> [Part] {
        let whole = headerBytes(headers + [("Nats-Msg-Id", messageID)])
        guard whole + payload.count > maximumPayload else { return [Part(messageID: messageID, headers: headers, payload: payload[...])] }
        // Room for the longest part number and message id, whatever N turns out to be.
        let perPart = max(maximumPayload - whole - headerBytes([(header, "9999999999/9999999999")]) - 12, 1)
        let count = (payload.count + perPart - 1) / perPart
        return (0..<count).map { index in
            let start = index * perPart
            return Part(
                messageID: "\(messageID)/\(index + 1)", headers: headers + [(header, "\(index + 1)/\(count)")],
                payload: payload[start..<min(start + perPart, payload.count)]
            )
        }
    }

    /// The bytes `headers` take in an `HPUB`: the version line, `name: value` lines and the blank line.
    static func headerBytes(_ headers: [(name: String, value: String)]) -> Int {
        headers.reduce("NATS/1.0\r\n\r\n".utf8.count) { $0 + $1.name.utf8.count + $1.value.utf8.count + 4 }
    }

    /// Joins parts as they arrive in stream order. A value, unit-tested without a server.
    public struct Assembler: Sendable {
        private var joined: [UInt8] = []
        private var next: (index: Int, count: Int)?

        public init() {}

        /// Whether a part has come and not the last: the reader must not count the stream as read past it.
        public var isJoining: Bool { next != nil }

        /// What a message's `Pgherald-Part` value and payload make.
        public enum Outcome: Sendable, Equatable {
            /// The last part came: the whole payload.
            case whole([UInt8])
            /// More parts are to come.
            case waiting
            /// The part does not follow what came before, as when reading starts between
            /// the parts of one payload; what was joined so far is dropped with it.
            case skipped(String)
        }

        public mutating func add(part value: String, payload: [UInt8]) -> Outcome {
            let numbers = value.split(separator: "/", omittingEmptySubsequences: false)
            guard numbers.count == 2, let index = Int(numbers[0]), let count = Int(numbers[1]), count >= 2, (1...count).contains(index) else {
                reset()
                return .skipped("\(header) '\(value)' is not I/N")
            }
            if index == 1 {
                let dropped = next
                joined = payload
                next = (2, count)
                return dropped.map { .skipped("part 1/\(count) came before part \($0.index)/\($0.count) of the payload before it") } ?? .waiting
            }
            guard let expected = next, expected == (index, count) else {
                let expected = next.map { "\($0.index)/\($0.count)" } ?? "1/N"
                reset()
                return .skipped("part \(value) came where \(expected) was expected")
            }
            joined += payload
            guard index == count else {
                next = (index + 1, count)
                return .waiting
            }
            defer { reset() }
            return .whole(joined)
        }

        private mutating func reset() {
            joined = []
            next = nil
        }
    }
}

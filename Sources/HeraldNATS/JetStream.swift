import Foundation

/// JetStream over a ``NATSConnection``: publish acknowledgements, and the
/// few API calls a publisher needs to find or create its stream.
public struct JetStream: Sendable {
    public let connection: NATSConnection
    /// How long an acknowledgement or an API answer may take.
    public var timeout: Duration

    public init(connection: NATSConnection, timeout: Duration = .seconds(5)) {
        self.connection = connection
        self.timeout = timeout
    }

    /// What JetStream answered a publish: where the message is, and whether
    /// it was a repeat within the stream's duplicate window (and not stored again).
    public struct Acknowledgement: Sendable, Equatable, Decodable {
        public var stream: String
        public var seq: UInt64
        public var duplicate: Bool?
    }

    struct APIError: Decodable {
        struct Detail: Decodable {
            var code: Int
            var description: String?
        }
        var error: Detail?
    }

    /// Publishes one message with `Nats-Msg-Id: messageID`; returns its reply
    /// subject for ``acknowledgement(of:subject:)``. Publishes go out in the order of these calls.
    public func send(subject: String, messageID: String, headers: [(name: String, value: String)] = [], payload: [UInt8]) async throws -> String {
        try await connection.send(subject: subject, headers: [("Nats-Msg-Id", messageID)] + headers, payload: payload)
    }

    /// Waits for the acknowledgement of a publish made with ``send(subject:messageID:headers:payload:)``.
    public func acknowledgement(of reply: String, subject: String) async throws -> Acknowledgement {
        let answer = try await connection.reply(to: reply, timeout: timeout)
        if answer.status == 503 {
            throw NATSError(.noStream, "no JetStream stream takes subject \(subject): create one, or set nats.create_stream: true")
        }
        if let failure = try? JSONDecoder().decode(APIError.self, from: Data(answer.payload)).error {
            throw NATSError(.jetStream, "JetStream refused the publish to \(subject): \(failure.description ?? "error \(failure.code)")")
        }
        do {
            return try JSONDecoder().decode(Acknowledgement.self, from: Data(answer.payload))
        } catch {
            throw NATSError(.protocolViolation, "JetStream's acknowledgement is not what was expected: \(String(decoding: answer.payload.prefix(200), as: UTF8.self))")
        }
    }

    /// A stream's configuration, as far as a publisher sets it.
    public struct StreamConfiguration: Sendable, Equatable, Codable {
        public var name: String
        public var subjects: [String]
        /// In nanoseconds, as the API takes it.
        public var duplicateWindow: Int64
        public var storage = "file"
        public var retention = "limits"
        /// Copies kept on as many servers of a JetStream cluster.
        public var replicas: Int

        public init(name: String, subjects: [String], duplicateWindow: Duration, replicas: Int = 1) {
            self.name = name
            self.subjects = subjects
            self.duplicateWindow = Int64(duplicateWindow / .nanoseconds(1))
            self.replicas = replicas
        }

        enum CodingKeys: String, CodingKey {
            case name, subjects, duplicateWindow = "duplicate_window", storage, retention, replicas = "num_replicas"
        }
    }

    private struct StreamInfo: Decodable {
        var config: StreamConfiguration
    }

    /// The stream's configuration; nil when there is no such stream.
    public func stream(named name: String) async throws -> StreamConfiguration? {
        let answer = try await api("STREAM.INFO.\(name)", payload: [])
        if let failure = try? JSONDecoder().decode(APIError.self, from: Data(answer)).error {
            if failure.code == 404 { return nil }
            throw NATSError(.jetStream, "cannot read stream \(name): \(failure.description ?? "error \(failure.code)")")
        }
        return try? JSONDecoder().decode(StreamInfo.self, from: Data(answer)).config
    }

    /// Creates the stream, or updates its subjects and duplicate window.
    public func createOrUpdate(_ configuration: StreamConfiguration) async throws {
        let exists = try await stream(named: configuration.name) != nil
        let answer = try await api("STREAM.\(exists ? "UPDATE" : "CREATE").\(configuration.name)", payload: Array(try JSONEncoder().encode(configuration)))
        if let failure = try? JSONDecoder().decode(APIError.self, from: Data(answer)).error {
            throw NATSError(.jetStream, "cannot \(exists ? "update" : "create") stream \(configuration.name): \(failure.description ?? "error \(failure.code)")")
        }
    }

    func api(_ call: String, payload: [UInt8]) async throws -> [UInt8] {
        let answer = try await connection.request(subject: "$JS.API.\(call)", payload: payload, timeout: timeout)
        if answer.status == 503 {
            throw NATSError(.jetStream, "the NATS server has no JetStream (start it with -js)")
        }
        return answer.payload
    }
}

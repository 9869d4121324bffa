import Foundation

/// What a client sends a NATS server.
public enum NATSClientOperation: Sendable {
    case connect(NATSConnectOptions)
    /// `PUB`, or `HPUB` when there are headers.
    case publish(subject: String, replyTo: String?, headers: [(name: String, value: String)], payload: [UInt8])
    case subscribe(subject: String, subscriptionID: String)
    case unsubscribe(subscriptionID: String)
    case ping
    case pong

    /// Appends the operation's wire form.
    public func encode(into bytes: inout [UInt8]) {
        switch self {
        case .connect(let options):
            bytes += Array("CONNECT ".utf8)
            // Sorted keys: the same options always make the same line.
            let encoder = JSONEncoder()
            encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
            bytes += (try? encoder.encode(options)).map(Array.init) ?? Array("{}".utf8)
            bytes += Self.crlf
        case .publish(let subject, let replyTo, let headers, let payload):
            let reply = replyTo.map { " " + $0 } ?? ""
            if headers.isEmpty {
                bytes += Array("PUB \(subject)\(reply) \(payload.count)\r\n".utf8)
            } else {
                var block = "NATS/1.0\r\n"
                for header in headers { block += "\(header.name): \(header.value)\r\n" }
                block += "\r\n"
                let head = Array(block.utf8)
                bytes += Array("HPUB \(subject)\(reply) \(head.count) \(head.count + payload.count)\r\n".utf8)
                bytes += head
            }
            bytes += payload
            bytes += Self.crlf
        case .subscribe(let subject, let subscriptionID):
            bytes += Array("SUB \(subject) \(subscriptionID)\r\n".utf8)
        case .unsubscribe(let subscriptionID):
            bytes += Array("UNSUB \(subscriptionID)\r\n".utf8)
        case .ping:
            bytes += Array("PING\r\n".utf8)
        case .pong:
            bytes += Array("PONG\r\n".utf8)
        }
    }

    static let crlf: [UInt8] = [UInt8(ascii: "\r"), UInt8(ascii: "\n")]
}

/// The `CONNECT` options a publishing client sends: no echo, headers and
/// "no responders" on, and at most one way to authenticate, whose fields
/// ``NATSAuthentication`` fills once the server's `INFO` gave its nonce.
public struct NATSConnectOptions: Sendable, Encodable, Equatable {
    public var name: String
    public var version: String
    public var authentication: NATSAuthentication
    var user: String?
    var password: String?
    var token: String?
    var nkey: String?
    var jwt: String?
    var signature: String?
    public var verbose = false
    public var pedantic = false
    public var tlsRequired = false
    public var lang = "swift"
    public var protocolVersion = 1
    public var headers = true
    public var noResponders = true
    public var echo = false

    public init(name: String, version: String, authentication: NATSAuthentication = .none) {
        self.name = name
        self.version = version
        self.authentication = authentication
    }

    /// The options to send to a server whose `INFO` carried `nonce`.
    public func answering(nonce: String?) throws(NATSError) -> NATSConnectOptions {
        var options = self
        try authentication.apply(to: &options, nonce: nonce)
        return options
    }

    enum CodingKeys: String, CodingKey {
        case name, version, user, password = "pass", token = "auth_token", nkey, jwt, signature = "sig"
        case verbose, pedantic, tlsRequired = "tls_required", lang, protocolVersion = "protocol", headers, noResponders = "no_responders", echo
    }
}

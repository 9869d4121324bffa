import HTTPTypes
import HeraldRealtime

/// The streams open on the socket's API (`/events` and `/queries`), in all
/// and by who holds them: the key or user that opened one over the network,
/// and the address it came from. A value, checked and changed under the
/// server's lock, and unit-tested without sockets.
///
/// Over HTTP/2 one connection carries up to 100 streams, so the limit per
/// address on connections (`http.max_connections_per_address`) alone would
/// let one address hold ten times `socket.max_subscribers`.
struct StreamLedger: Sendable {
    /// Who holds a stream.
    enum Holder: Hashable, Sendable, CustomStringConvertible {
        case credential(RealtimeConsumer)
        case address(String)

        /// For `/stats`, `/metrics` and refusals: never a key or a token.
        var description: String {
            switch self {
            case .credential(let consumer): consumer.description
            case .address(let address): "address \(address)"
            }
        }

        /// The key that sets this holder's limit.
        var limitKey: String {
            switch self {
            case .credential(let consumer): consumer.isUser ? "socket.max_subscribers_per_user" : "socket.max_subscribers_per_key"
            case .address: "socket.max_subscribers_per_address"
            }
        }
    }

    /// A stream refused: the daemon's limit (503) or a holder's share (429), named.
    struct Refusal: Error, Sendable, Hashable {
        var status: HTTPResponse.Status
        var code: String
        var message: String
    }

    let maximum: Int
    let limits: SocketConfiguration.StreamShares
    private(set) var total = 0
    private(set) var held: [Holder: Int] = [:]

    init(maximum: Int, limits: SocketConfiguration.StreamShares) {
        self.maximum = maximum
        self.limits = limits
    }

    /// Counts a stream of `holders`, all or none, or says which limit refuses it.
    mutating func open(_ holders: [Holder]) throws(Refusal) {
        guard total < maximum else {
            throw Refusal(status: .serviceUnavailable, code: "too_many_subscribers", message: "the daemon serves at most \(maximum) streams")
        }
        for holder in holders {
            let (limit, count) = (limit(of: holder), held[holder] ?? 0)
            guard limit == 0 || count < limit else {
                throw Refusal(
                    status: .tooManyRequests, code: "too_many_streams",
                    message: "\(holder) holds \(count) streams, its limit (\(holder.limitKey))"
                )
            }
        }
        total += 1
        for holder in holders { held[holder, default: 0] += 1 }
    }

    /// Releases a stream that ``open(_:)`` counted; a holder with none left is forgotten.
    mutating func close(_ holders: [Holder]) {
        total -= 1
        for holder in holders {
            let count = (held[holder] ?? 0) - 1
            held[holder] = count > 0 ? count : nil
        }
    }

    /// The `count` holders with the most streams, most first.
    func top(_ count: Int) -> [(holder: Holder, streams: Int)] {
        held.sorted { ($0.value, $1.key.description) > ($1.value, $0.key.description) }.prefix(count).map { ($0.key, $0.value) }
    }

    private func limit(of holder: Holder) -> Int {
        switch holder {
        case .credential(let consumer): consumer.isUser ? limits.perUser : limits.perKey
        case .address: limits.perAddress
        }
    }
}

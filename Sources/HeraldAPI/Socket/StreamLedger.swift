import HTTPTypes
import HeraldRealtime

/// The streams open on the socket's API (`/events` and `/queries`), in all
/// and by who holds them: the key or user that opened one over the network,
/// and the address it came from, with the filter conditions their streams
/// hold. A value, checked and changed under the server's lock, and
/// unit-tested without sockets.
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

        /// The key that sets this holder's limit of `what` (`subscribers` or `conditions`).
        func limitKey(_ what: String) -> String {
            switch self {
            case .credential(let consumer): "socket.max_\(what)_per_\(consumer.isUser ? "user" : "key")"
            case .address: "socket.max_\(what)_per_address"
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
    /// The cost of the conditions each holder's streams hold (``ColumnPredicate/cost``): every
    /// event of their tables is checked against all of them, on the daemon's cores.
    private(set) var conditions: [Holder: Int] = [:]

    init(maximum: Int, limits: SocketConfiguration.StreamShares) {
        self.maximum = maximum
        self.limits = limits
    }

    /// Counts a stream of `holders` holding conditions that cost `cost`, all
    /// or none, or says which limit refuses it.
    mutating func open(_ holders: [Holder], conditions cost: Int = 0) throws(Refusal) {
        guard total < maximum else {
            throw Refusal(status: .serviceUnavailable, code: "too_many_subscribers", message: "the daemon serves at most \(maximum) streams")
        }
        for holder in holders {
            let (limit, count) = (limit(of: holder), held[holder] ?? 0)
            guard limit == 0 || count < limit else {
                throw Refusal(
                    status: .tooManyRequests, code: "too_many_streams",
                    message: "\(holder) holds \(count) streams, its limit (\(holder.limitKey("subscribers")))"
                )
            }
            let (conditionLimit, holding) = (conditionLimit(of: holder), conditions[holder] ?? 0)
            guard cost == 0 || conditionLimit == 0 || holding + cost <= conditionLimit else {
                throw Refusal(
                    status: .tooManyRequests, code: "too_many_conditions",
                    message: "\(holder)'s streams hold conditions of cost \(holding), and this one's \(cost) would pass its limit, \(conditionLimit) (\(holder.limitKey("conditions")); a like pattern costs 1 for each 64 characters but %)"
                )
            }
        }
        total += 1
        for holder in holders {
            held[holder, default: 0] += 1
            if cost > 0 { conditions[holder, default: 0] += cost }
        }
    }

    /// Releases a stream that ``open(_:conditions:)`` counted; a holder with none left is forgotten.
    mutating func close(_ holders: [Holder], conditions cost: Int = 0) {
        total -= 1
        for holder in holders {
            let count = (held[holder] ?? 0) - 1
            held[holder] = count > 0 ? count : nil
            let holding = (conditions[holder] ?? 0) - cost
            conditions[holder] = holding > 0 ? holding : nil
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

    private func conditionLimit(of holder: Holder) -> Int {
        switch holder {
        case .credential(let consumer): consumer.isUser ? limits.conditionsPerUser : limits.conditionsPerKey
        case .address: limits.conditionsPerAddress
        }
    }
}

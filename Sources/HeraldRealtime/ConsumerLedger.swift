/// What each consumer holds now, and the limits per consumer: a value, checked and changed under
/// the endpoint's lock, and unit-tested without sockets.
public struct ConsumerLedger: Sendable {
    /// Limits per consumer; 0 turns one off.
    public struct Limits: Sendable, Hashable {
        /// Key `realtime.max_connections_per_key`: connections of one shared credential. Default 5,000.
        public var connectionsPerKey: Int
        /// Key `realtime.max_connections_per_user`: connections of one token subject. Default 100.
        public var connectionsPerUser: Int
        /// Key `realtime.max_channels_per_key`: channels of one shared credential. Default 5,000.
        public var channelsPerKey: Int
        /// Key `realtime.max_channels_per_user`: channels of one token subject. Default 1,000.
        public var channelsPerUser: Int
        /// Key `realtime.max_conditions_per_key`: the cost of the filter
        /// conditions that one shared credential's channels hold together
        /// (1 a comparison, and 1 for each 64 characters but `%` of a `like`
        /// pattern): each event of their tables is checked against every one.
        /// Default 20,000: four for each of 5,000 channels.
        public var conditionsPerKey: Int
        /// Key `realtime.max_conditions_per_user`: the same for one token
        /// subject. Default 2,048: rows of 2,000 characters cost the daemon
        /// about 6 ms of checks each at that limit.
        public var conditionsPerUser: Int

        public init(
            connectionsPerKey: Int = 5_000, connectionsPerUser: Int = 100, channelsPerKey: Int = 5_000, channelsPerUser: Int = 1_000,
            conditionsPerKey: Int = 20_000, conditionsPerUser: Int = 2_048
        ) {
            self.connectionsPerKey = connectionsPerKey
            self.connectionsPerUser = connectionsPerUser
            self.channelsPerKey = channelsPerKey
            self.channelsPerUser = channelsPerUser
            self.conditionsPerKey = conditionsPerKey
            self.conditionsPerUser = conditionsPerUser
        }
    }

    /// What one consumer holds.
    public struct Usage: Sendable, Hashable {
        public var connections = 0
        public var channels = 0
        /// The cost of its channels' filter conditions.
        public var conditions = 0
    }

    /// A refusal that names the limit reached and its key.
    public struct Refusal: Error, Sendable, Hashable, CustomStringConvertible {
        /// `too_many_connections`, `too_many_channels` or `too_many_conditions`.
        public var code: String
        public var description: String
    }

    public var limits: Limits
    public private(set) var usage: [RealtimeConsumer: Usage] = [:]

    public init(limits: Limits = Limits()) {
        self.limits = limits
    }

    /// Counts a connection of `consumer`, or says which limit refuses it.
    public mutating func openConnection(_ consumer: RealtimeConsumer) throws(Refusal) {
        try check(connectionOf: consumer)
        usage[consumer, default: Usage()].connections += 1
    }

    /// Whether a connection of `consumer` would be refused now, without counting it.
    private func check(connectionOf consumer: RealtimeConsumer) throws(Refusal) {
        let limit = consumer.isUser ? limits.connectionsPerUser : limits.connectionsPerKey
        let held = usage[consumer]?.connections ?? 0
        guard limit == 0 || held < limit else {
            throw Refusal(
                code: "too_many_connections",
                description: "\(consumer) holds \(held) connections, its limit (realtime.max_connections_per_\(consumer.isUser ? "user" : "key"))"
            )
        }
    }

    public mutating func closeConnection(_ consumer: RealtimeConsumer) {
        release(consumer) { $0.connections -= 1 }
    }

    /// Counts a channel of `consumer` whose bindings' conditions cost `conditions`, or says which limit refuses it.
    public mutating func openChannel(_ consumer: RealtimeConsumer, conditions cost: Int = 0) throws(Refusal) {
        let kind = consumer.isUser ? "user" : "key"
        let limit = consumer.isUser ? limits.channelsPerUser : limits.channelsPerKey
        let held = usage[consumer] ?? Usage()
        guard limit == 0 || held.channels < limit else {
            throw Refusal(
                code: "too_many_channels",
                description: "\(consumer) holds \(held.channels) channels, its limit (realtime.max_channels_per_\(kind))"
            )
        }
        let conditionLimit = consumer.isUser ? limits.conditionsPerUser : limits.conditionsPerKey
        guard cost == 0 || conditionLimit == 0 || held.conditions + cost <= conditionLimit else {
            throw Refusal(
                code: "too_many_conditions",
                description: "\(consumer)'s channels hold filter conditions of cost \(held.conditions), and this join's \(cost) would pass its limit, \(conditionLimit) (realtime.max_conditions_per_\(kind); a like pattern costs 1 for each 64 characters but %)"
            )
        }
        usage[consumer, default: Usage()].channels += 1
        usage[consumer, default: Usage()].conditions += cost
    }

    public mutating func closeChannel(_ consumer: RealtimeConsumer, conditions cost: Int = 0) {
        release(consumer) {
            $0.channels -= 1
            $0.conditions -= cost
        }
    }

    /// The `count` consumers holding the most, connections and channels together, most first.
    public func top(_ count: Int) -> [(consumer: RealtimeConsumer, usage: Usage)] {
        usage.sorted { ($0.value.connections + $0.value.channels, $1.key.description) > ($1.value.connections + $1.value.channels, $0.key.description) }
            .prefix(count).map { ($0.key, $0.value) }
    }

    /// A consumer that holds nothing is forgotten, so that the ledger stays as large as what is open.
    private mutating func release(_ consumer: RealtimeConsumer, _ change: (inout Usage) -> Void) {
        guard var held = usage[consumer] else { return }
        change(&held)
        if held.connections <= 0 && held.channels <= 0 {
            usage[consumer] = nil
        } else {
            usage[consumer] = Usage(connections: max(held.connections, 0), channels: max(held.channels, 0), conditions: max(held.conditions, 0))
        }
    }
}

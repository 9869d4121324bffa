@testable import HeraldRealtime
import Testing

@Suite struct ConsumerLedgerTests {
    let limits = ConsumerLedger.Limits(connectionsPerKey: 3, connectionsPerUser: 1, channelsPerKey: 2, channelsPerUser: 1)
    let key = RealtimeConsumer.shared("key web")
    let alice = RealtimeConsumer.user(role: "authenticated", subject: "alice")
    let bob = RealtimeConsumer.user(role: "authenticated", subject: "bob")

    @Test func eachConsumerHasItsOwnShareAndTheRefusalNamesTheLimit() throws {
        var ledger = ConsumerLedger(limits: limits)
        for _ in 0..<3 { try ledger.openConnection(key) }
        #expect(throws: ConsumerLedger.Refusal(code: "too_many_connections", description: "key web holds 3 connections, its limit (realtime.max_connections_per_key)")) {
            try ledger.openConnection(key)
        }
        try ledger.openConnection(alice)
        #expect(throws: ConsumerLedger.Refusal.self) { try ledger.openConnection(alice) }
        // Bob is not alice: one user's share is not another's.
        try ledger.openConnection(bob)
        try ledger.openChannel(alice)
        #expect(throws: ConsumerLedger.Refusal(code: "too_many_channels", description: "role authenticated, sub alice holds 1 channels, its limit (realtime.max_channels_per_user)")) {
            try ledger.openChannel(alice)
        }
        ledger.closeConnection(key)
        try ledger.openConnection(key)
    }

    @Test func aConsumerThatHoldsNothingIsForgottenAndTheTopComesFirst() throws {
        var ledger = ConsumerLedger(limits: limits)
        try ledger.openConnection(key)
        try ledger.openChannel(key)
        try ledger.openChannel(key)
        try ledger.openConnection(alice)
        #expect(ledger.top(1).map(\.consumer) == [key])
        #expect(ledger.top(5).map(\.usage) == [.init(connections: 1, channels: 2), .init(connections: 1, channels: 0)])
        ledger.closeConnection(alice)
        // Closing what was never opened cannot go below zero or bring a consumer back.
        ledger.closeChannel(alice)
        #expect(ledger.usage[alice] == nil)
        ledger.closeChannel(key)
        ledger.closeChannel(key)
        ledger.closeConnection(key)
        #expect(ledger.usage.isEmpty)
    }

    @Test func zeroTurnsALimitOff() throws {
        var ledger = ConsumerLedger(limits: .init(connectionsPerKey: 0, connectionsPerUser: 0, channelsPerKey: 0, channelsPerUser: 0))
        for _ in 0..<100 {
            try ledger.openConnection(key)
            try ledger.openChannel(alice)
        }
        #expect(ledger.usage[key]?.connections == 100)
    }

    @Test func channelConditionsHaveAShareOfTheirOwnGivenBackOnClose() throws {
        var ledger = ConsumerLedger(limits: .init(conditionsPerKey: 5, conditionsPerUser: 8))
        try ledger.openChannel(alice, conditions: 4)
        try ledger.openChannel(alice, conditions: 4)
        #expect(throws: ConsumerLedger.Refusal(
            code: "too_many_conditions",
            description: "role authenticated, sub alice's channels hold filter conditions of cost 8, and this join's 1 would pass its limit, 8 (realtime.max_conditions_per_user; a like pattern costs 1 for each 64 characters but %)"
        )) { try ledger.openChannel(alice, conditions: 1) }
        // Channels without conditions cost nothing; bob and the key have their own shares.
        try ledger.openChannel(alice)
        try ledger.openChannel(bob, conditions: 8)
        #expect(throws: ConsumerLedger.Refusal.self) { try ledger.openChannel(key, conditions: 6) }
        try ledger.openChannel(key, conditions: 5)
        #expect(ledger.usage[alice] == .init(connections: 0, channels: 3, conditions: 8))
        ledger.closeChannel(alice, conditions: 4)
        try ledger.openChannel(alice, conditions: 3)
        for cost in [4, 3, 0] { ledger.closeChannel(alice, conditions: cost) }
        #expect(ledger.usage[alice] == nil)
    }
}

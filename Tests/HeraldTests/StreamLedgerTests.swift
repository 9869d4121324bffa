@testable import HeraldAPI
import HeraldRealtime
import Testing

@Suite struct StreamLedgerTests {
    let app = StreamLedger.Holder.credential(.shared("key app"))
    let alice = StreamLedger.Holder.credential(.user(role: "authenticated", subject: "alice"))
    let address = StreamLedger.Holder.address("192.0.2.7")

    @Test func eachHolderTakesItsShareAndTheRefusalNamesTheLimit() throws {
        var ledger = StreamLedger(maximum: 100, limits: .init(perKey: 3, perUser: 2, perAddress: 4))
        for _ in 0..<2 { try ledger.open([alice, address]) }
        #expect(throws: StreamLedger.Refusal(
            status: .tooManyRequests, code: "too_many_streams",
            message: "role authenticated, sub alice holds 2 streams, its limit (socket.max_subscribers_per_user)"
        )) { try ledger.open([alice, address]) }
        // All or none: alice's refusal did not count against the address.
        #expect(ledger.held[address] == 2)
        for _ in 0..<2 { try ledger.open([app, address]) }
        let refusal = try #require(throws: StreamLedger.Refusal.self) { try ledger.open([app, address]) }
        #expect(refusal.message == "address 192.0.2.7 holds 4 streams, its limit (socket.max_subscribers_per_address)")
        #expect(ledger.held[app] == 2 && ledger.total == 4)
    }

    @Test func theDaemonsLimitComesFirstAndCountsStreamsWithoutHolders() throws {
        var ledger = StreamLedger(maximum: 2, limits: .init(perKey: 0, perUser: 0, perAddress: 0))
        try ledger.open([])
        try ledger.open([app])
        let refusal = try #require(throws: StreamLedger.Refusal.self) { try ledger.open([alice]) }
        #expect(refusal.status == .serviceUnavailable && refusal.code == "too_many_subscribers")
        ledger.close([app])
        try ledger.open([alice])
        #expect(ledger.total == 2)
    }

    @Test func aHolderWithNothingLeftIsForgottenAndTheTopComesFirst() throws {
        var ledger = StreamLedger(maximum: 100, limits: .init())
        for _ in 0..<3 { try ledger.open([app, address]) }
        try ledger.open([alice, address])
        #expect(ledger.top(2).map(\.holder) == [address, app])
        ledger.close([alice, address])
        #expect(ledger.held[alice] == nil && ledger.held.count == 2)
        for _ in 0..<3 { ledger.close([app, address]) }
        #expect(ledger.held.isEmpty && ledger.total == 0)
    }

    @Test func conditionsHaveAShareOfTheirOwnGivenBackOnClose() throws {
        var ledger = StreamLedger(maximum: 100, limits: .init(conditionsPerKey: 0, conditionsPerUser: 10, conditionsPerAddress: 12))
        try ledger.open([alice, address], conditions: 4)
        try ledger.open([alice, address], conditions: 6)
        #expect(throws: StreamLedger.Refusal(
            status: .tooManyRequests, code: "too_many_conditions",
            message: "role authenticated, sub alice's streams hold conditions of cost 10, and this one's 1 would pass its limit, 10 (socket.max_conditions_per_user; a like pattern costs 1 for each 64 characters but %)"
        )) { try ledger.open([alice, address], conditions: 1) }
        // A stream without conditions costs nothing, and 0 turns the key's limit off; the address's still holds.
        try ledger.open([alice, address])
        try ledger.open([app, address], conditions: 2)
        let refusal = try #require(throws: StreamLedger.Refusal.self) { try ledger.open([app, address], conditions: 1) }
        #expect(refusal.message.contains("(socket.max_conditions_per_address;"))
        // All or none: refusals counted nothing.
        #expect(ledger.conditions[alice] == 10 && ledger.conditions[address] == 12 && ledger.conditions[app] == 2)
        ledger.close([alice, address], conditions: 6)
        try ledger.open([alice, address], conditions: 1)
        #expect(ledger.conditions[alice] == 5)
        ledger.close([alice, address], conditions: 4)
        ledger.close([alice, address], conditions: 1)
        ledger.close([alice, address])
        ledger.close([app, address], conditions: 2)
        #expect(ledger.conditions.isEmpty && ledger.held.isEmpty && ledger.total == 0)
    }
}

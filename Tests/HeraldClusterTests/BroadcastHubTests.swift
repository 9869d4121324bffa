@testable import HeraldCluster
import Herald
import HeraldRealtime
import Logging
import Testing

/// A join's `presence_state`, framed once per topic and kept only while the topic's presence stays as it was.
struct BroadcastHubTests {
    final class Channel {}

    @Test func aJoinGetsThePresenceAsItIsNowAfterEveryChange() async {
        let hub = BroadcastHub(logger: Logger(label: "test"))
        let room = BroadcastHub.Topic(name: "room", isPrivate: false)
        let budget = SocketBudget(maximumBytes: 1 << 20)
        let channels = (0..<4).map { _ in Channel() }
        let ids = channels.map(ObjectIdentifier.init)
        var inboxes = ids.map { hub.join(room, channel: $0, framing: .v2, echo: false, budget: budget).makeAsyncIterator() }
        func state(of index: Int) async -> String {
            hub.sendPresenceState(room, to: ids[index])
            // The diffs of the tracks before it come first, in order.
            while let frame = await inboxes[index].next() {
                let text = String(decoding: frame, as: UTF8.self)
                if text.contains("presence_state") { return text }
            }
            return ""
        }
        hub.track(room, channel: ids[0], key: "ann", meta: .object([:]))
        #expect(await state(of: 1).contains("\"ann\""))
        // From the framed state kept for the topic, and again after a track changes it.
        #expect(await state(of: 2).contains("\"ann\""))
        hub.track(room, channel: ids[1], key: "ben", meta: .object([:]))
        let afterTrack = await state(of: 3)
        #expect(afterTrack.contains("\"ann\"") && afterTrack.contains("\"ben\""), "\(afterTrack)")
        hub.leave(room, channel: ids[0])
        let afterLeave = await state(of: 3)
        #expect(!afterLeave.contains("\"ann\"") && afterLeave.contains("\"ben\""), "\(afterLeave)")
        _ = channels
    }
}

@Suite struct BroadcastTopicTests {
    /// `Åsa` with one character and with `A` and a combining ring are two rooms to `realtime.messages`.
    @Test func roomsWhoseNamesOnlyLookAlikeAreTwo() {
        let rooms: Set = [BroadcastHub.Topic(name: "\u{00C5}sa", isPrivate: true), BroadcastHub.Topic(name: "A\u{030A}sa", isPrivate: true)]
        #expect(rooms.count == 2)
        #expect(BroadcastHub.Topic(name: "\u{00C5}sa", isPrivate: true) != BroadcastHub.Topic(name: "\u{00C5}sa", isPrivate: false))
    }
}

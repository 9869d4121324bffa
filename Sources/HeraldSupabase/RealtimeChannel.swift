import Foundation
import Herald
import HeraldCluster
import HeraldPostgres
import HeraldRealtime
import HeraldSupport
import NIOCore
import Synchronization

/// One joined channel: its bindings under its caller's current grant, and
/// the task that delivers to it.
final class RealtimeChannel: Sendable {
    /// A binding as asked for and as the caller's grant narrowed it.
    struct Binding: Sendable {
        let id: Int
        let requested: EventFilter
        var granted: EventFilter
    }

    struct State: Sendable {
        var caller: RealtimeCaller
        /// Empty until the bindings have been checked.
        var bindings: [Binding] = []
        var task: Task<Void, Never>?
        /// Whether the socket dropped (its position is kept) rather than the client leaving.
        var remember = false
        /// The newest event the channel has had: delivered, or published before it subscribed.
        var position: String?
        var subscription: Subscription?
        /// Why a reload of the access rules ended the channel, if it did.
        var revokedBecause: String?
        /// A pushed token changed the row-security identity: the channel moves to its new cohort.
        var movesCohort = false
        /// For a private channel under row-level security: what the policies
        /// on `realtime.messages` let its user do. Nil: its `topics:` grant decides.
        var authorization: ChannelAuthorization?
        /// The consumer the channel is counted against, which a pushed token may change, and
        /// whether it was released: changed and read under the endpoint's ledger lock.
        var counted: RealtimeConsumer?
        var released = false
        /// Whether matching its bindings has proved costly (a `like` over long rows): it then runs
        /// on ``ColumnCheckLane``. Until measured, a binding with a pattern is taken for costly.
        var matchingIsCostly: Bool?
        /// The server ended it (refused, revoked, expired, fallen behind): its topic takes no more sends.
        var ended = false
    }

    let join: RealtimeJoin
    let state: Mutex<State>
    /// The key its presence is tracked under: the join's, or one made for it.
    let presenceKey: String

    init(join: RealtimeJoin, caller: RealtimeCaller, authorization: ChannelAuthorization? = nil) {
        self.join = join
        state = Mutex(State(caller: caller, authorization: authorization))
        presenceKey = join.presence.key.isEmpty ? UUID().uuidString.lowercased() : join.presence.key
    }

    var caller: RealtimeCaller { state.withLock { $0.caller } }

    /// What the policies on `realtime.messages` let its user do; nil where they do not govern it.
    var authorization: ChannelAuthorization? { state.withLock { $0.authorization } }

    /// Where its broadcasts go and come from.
    var broadcastTopic: BroadcastHub.Topic { .init(name: join.topic, isPrivate: join.isPrivate) }

    /// Runs `body` on `eventLoop`, the socket's, so that its writes need no hop.
    func start(on eventLoop: any EventLoop, _ body: @escaping @Sendable () async -> Void) {
        let task = Task(executorPreference: EventLoopTaskExecutor(eventLoop: eventLoop)) { await body() }
        state.withLock { $0.task = task }
    }

    /// Ends delivery and waits for the channel's task to finish.
    /// - Parameter remember: keep the channel's position for a rejoin (the socket dropped).
    func stop(remember: Bool) async {
        let task = state.withLock { state in
            state.remember = remember
            return state.task
        }
        task?.cancel()
        await task?.value
    }

    var shouldRemember: Bool { state.withLock { $0.remember } }

    /// Keeps the channel's subscription so that ``revoke(_:)`` can end it;
    /// returns the reason if the channel was revoked before it had one.
    func deliver(from subscription: Subscription) -> String? {
        state.withLock { state in
            state.subscription = subscription
            return state.revokedBecause
        }
    }

    var revokedBecause: String? { state.withLock { $0.revokedBecause } }

    /// Marks the channel ended by the server, before it says so: a client that has its
    /// `phx_close` must find the topic closed to its broadcasts and presence, as after a leave.
    func markEnded() {
        state.withLock { $0.ended = true }
    }

    /// Whether the server ended the channel, or is ending it.
    var hasEnded: Bool { state.withLock { $0.ended || $0.revokedBecause != nil } }

    /// Ends the channel when its caller's token expires, as Supabase does, whether or not an
    /// event comes: a channel of broadcasts and presence alone gets none. A token pushed
    /// meanwhile (`access_token`) moves the end.
    func endWhenTokenExpires() async {
        while let expiresAt = caller.expiresAt {
            guard let remaining = RealtimeIdentity.secondsUntilExpiry(expiresAt) else { return }
            if remaining <= 0 {
                revoke("Token has expired")
                return
            }
            do { try await Task.sleep(for: .seconds(min(remaining, 3_600))) } catch { return }
        }
    }

    /// Ends delivery after what is buffered; the channel then says why and closes.
    func revoke(_ reason: String) {
        let subscription = state.withLock { state in
            state.revokedBecause = reason
            return state.subscription
        }
        subscription?.cancel()
    }

    /// Narrows the bindings to a new caller's grant.
    /// - Throws: ``AccessDenied`` when a binding, or the channel's private topic,
    ///   falls outside it; nothing changes then.
    ///
    /// A caller of another row-security identity (other claims, another
    /// role) moves the channel to that identity's cohort from the next event.
    /// - Parameter authorization: the policies' answer for the new caller,
    ///   on a private channel they govern; it replaces the `topics:` check.
    func regrant(_ caller: RealtimeCaller, authorization: ChannelAuthorization? = nil) throws(AccessDenied) {
        if let authorization {
            guard authorization.mayJoin else {
                throw AccessDenied(ChannelAuthorization.readRefusal(topic: join.channelName))
            }
        } else if join.isPrivate, !caller.scope.covers(topic: join.channelName) {
            throw AccessDenied("the private topic '\(join.channelName)' is not granted to \(caller.name)")
        }
        let leaving = try state.withLock { (state) throws(AccessDenied) -> Subscription? in
            var bindings = state.bindings
            for index in bindings.indices {
                bindings[index].granted = try bindings[index].requested.narrowed(to: caller.scope)
            }
            state.bindings = bindings
            let moves = state.caller.scope.rowSecurity != caller.scope.rowSecurity
            state.caller = caller
            if authorization != nil { state.authorization = authorization }
            guard moves else { return nil }
            state.movesCohort = true
            return state.subscription
        }
        leaving?.cancel()
    }

    /// Whether the channel's subscription ended to move it to another cohort; clears the mark.
    func takeCohortMove() -> Bool {
        state.withLock { state in
            defer { state.movesCohort = false }
            return state.movesCohort
        }
    }

    /// The ids of the bindings `event` matches, and the caller's token expiry.
    /// ``matchingBindings(_:)`` of each event, measured: on ``ColumnCheckLane`` once matching
    /// has cost more than ``ColumnCheckLane/costlyPerEvent`` an event, so that one caller's costly
    /// bindings cannot take a core from the threads that deliver everyone's events.
    func matches(_ events: [Event]) async -> [(ids: [Int], expiresAt: Double?)] {
        let costly = state.withLock { state in
            state.matchingIsCostly ?? state.bindings.contains { $0.granted.matchesPatterns }
        }
        return costly ? await ColumnCheckLane.shared.run { self.measuredMatches(events) } : measuredMatches(events)
    }

    private func measuredMatches(_ events: [Event]) -> [(ids: [Int], expiresAt: Double?)] {
        let started = ColumnCheckLane.threadCPUTime()
        let matches = events.map(matchingBindings)
        let perEvent = (ColumnCheckLane.threadCPUTime() - started) / max(1, events.count)
        state.withLock { $0.matchingIsCostly = perEvent > ColumnCheckLane.costlyPerEvent }
        return matches
    }

    func matchingBindings(_ event: Event) -> (ids: [Int], expiresAt: Double?) {
        state.withLock { state in
            (state.bindings.filter { $0.granted.matches(event) }.map(\.id), state.caller.expiresAt)
        }
    }
}

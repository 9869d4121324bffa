import Synchronization

/// The bytes one realtime socket may hold, `realtime.max_queued_bytes`:
/// frames waiting for it in its channels' inboxes (``BroadcastHub``),
/// across all of them, and the message it is sending, while that message is
/// unfinished (its fragments so far). A frame that would pass it is missed
/// by that channel, as one past the inbox's count of frames is, so that a
/// client that does not read holds a bounded amount of memory however large
/// the broadcasts are. Room for one whole message (``messageBytes``) is kept
/// from the frames, so that a socket whose frames wait can still send.
package final class SocketBudget: Sendable {
    private struct State {
        /// Bytes of frames waiting, across the socket's channels.
        var queued = 0
        /// Bytes of the unfinished message.
        var message = 0
        /// What each open channel has waiting; a closed channel is absent, and takes nothing more.
        var channels: [ObjectIdentifier: Waiting] = [:]
    }

    private struct Waiting {
        var bytes = 0
        /// Missing frames since it last had nothing waiting: one episode, logged once.
        var missing = false
    }

    /// What became of a frame offered to a channel.
    package enum Reservation: Equatable {
        case reserved
        /// The socket's budget had no room: the channel misses the frame.
        /// `startsEpisode` when it missed none since it last had nothing waiting.
        case missed(startsEpisode: Bool)
        /// The channel is closed: it takes nothing more, and misses nothing.
        case closed
    }

    /// The bytes every socket holds, for `/metrics`.
    package final class Tally: Sendable {
        private let bytes = Atomic<Int>(0)

        package init() {}

        package var heldBytes: Int { bytes.load(ordering: .relaxed) }

        func add(_ delta: Int) {
            bytes.wrappingAdd(delta, ordering: .relaxed)
        }
    }

    package let maximumBytes: Int
    /// The largest message a client may send, whose room frames never take.
    package let messageBytes: Int
    private let tally: Tally?
    private let state = Mutex(State())

    package init(maximumBytes: Int, messageBytes: Int = 0, tally: Tally? = nil) {
        self.maximumBytes = maximumBytes
        self.messageBytes = messageBytes
        self.tally = tally
    }

    /// The bytes of frames waiting now, across the socket's channels.
    package var queuedBytes: Int { state.withLock { $0.queued } }

    /// The bytes held now: frames waiting and the unfinished message.
    package var heldBytes: Int { state.withLock { $0.queued + $0.message } }

    /// Starts counting for `channel`.
    package func open(_ channel: ObjectIdentifier) {
        state.withLock { $0.channels[channel] = Waiting() }
    }

    /// Takes `bytes` for a frame queued to `channel`, unless the socket's
    /// budget, less a message's room, has no room, or the channel is closed.
    package func reserve(_ bytes: Int, for channel: ObjectIdentifier) -> Reservation {
        let reservation = state.withLock { state -> Reservation in
            guard var waiting = state.channels[channel] else { return .closed }
            guard state.queued + state.message + bytes <= maximumBytes - messageBytes else {
                defer { state.channels[channel]?.missing = true }
                return .missed(startsEpisode: !waiting.missing)
            }
            waiting.bytes += bytes
            state.channels[channel] = waiting
            state.queued += bytes
            return .reserved
        }
        if reservation == .reserved { tally?.add(bytes) }
        return reservation
    }

    /// Gives back a frame's `bytes` once it is written, or was not queued
    /// after all. A channel left with nothing waiting has caught up: its episode of missing ends.
    package func release(_ bytes: Int, for channel: ObjectIdentifier) {
        let released = state.withLock { state in
            guard var waiting = state.channels[channel] else { return false }
            waiting.bytes -= bytes
            if waiting.bytes == 0 { waiting.missing = false }
            state.channels[channel] = waiting
            state.queued -= bytes
            return true
        }
        if released { tally?.add(-bytes) }
    }

    /// Gives back the `bytes` of a frame reserved for `channel` that its inbox
    /// had no room for: the channel misses it. True when that starts an episode of missing.
    package func miss(_ bytes: Int, for channel: ObjectIdentifier) -> Bool {
        // Nil for a closed channel, whose bytes went with it.
        let startsEpisode = state.withLock { state -> Bool? in
            guard var waiting = state.channels[channel] else { return nil }
            defer { state.channels[channel] = waiting }
            waiting.bytes -= bytes
            state.queued -= bytes
            guard !waiting.missing else { return false }
            waiting.missing = true
            return true
        }
        guard let startsEpisode else { return false }
        tally?.add(-bytes)
        return startsEpisode
    }

    /// Gives back everything `channel` had waiting: its inbox is gone, unread.
    package func close(_ channel: ObjectIdentifier) {
        let released = state.withLock { state in
            let queued = state.channels.removeValue(forKey: channel)?.bytes ?? 0
            state.queued -= queued
            return queued
        }
        tally?.add(-released)
    }

    /// Takes `bytes` for a fragment of the message the client is sending;
    /// false when the socket holds its budget already: the socket is to close.
    package func holdFragment(_ bytes: Int) -> Bool {
        let held = state.withLock { state in
            guard state.queued + state.message + bytes <= maximumBytes else { return false }
            state.message += bytes
            return true
        }
        if held { tally?.add(bytes) }
        return held
    }

    /// Gives back the unfinished message's fragments: its last frame came
    /// (it is read whole now), or the socket closed.
    package func finishMessage() {
        let released = state.withLock { state in
            defer { state.message = 0 }
            return state.message
        }
        tally?.add(-released)
    }
}

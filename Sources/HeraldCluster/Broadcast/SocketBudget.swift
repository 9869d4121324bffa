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
        var channels: [ObjectIdentifier: Int] = [:]
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
        state.withLock { $0.channels[channel] = 0 }
    }

    /// Takes `bytes` for a frame queued to `channel`; false when the socket's
    /// budget, less a message's room, has no room, or the channel is closed: the frame is missed.
    package func reserve(_ bytes: Int, for channel: ObjectIdentifier) -> Bool {
        let reserved = state.withLock { state in
            guard let queued = state.channels[channel], state.queued + state.message + bytes <= maximumBytes - messageBytes else { return false }
            state.channels[channel] = queued + bytes
            state.queued += bytes
            return true
        }
        if reserved { tally?.add(bytes) }
        return reserved
    }

    /// Gives back a frame's `bytes` once it is written, or was not queued after all.
    package func release(_ bytes: Int, for channel: ObjectIdentifier) {
        let released = state.withLock { state in
            guard let queued = state.channels[channel] else { return false }
            state.channels[channel] = queued - bytes
            state.queued -= bytes
            return true
        }
        if released { tally?.add(-bytes) }
    }

    /// Gives back everything `channel` had waiting: its inbox is gone, unread.
    package func close(_ channel: ObjectIdentifier) {
        let released = state.withLock { state in
            let queued = state.channels.removeValue(forKey: channel) ?? 0
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

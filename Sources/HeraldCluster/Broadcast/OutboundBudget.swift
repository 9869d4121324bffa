import Synchronization

/// The bytes one socket's channels may have waiting in their inboxes
/// (``BroadcastHub``), across all of them: `realtime.max_queued_bytes`. A
/// frame that would pass it is missed by that channel, as one past the
/// inbox's count of frames is, so that a client that does not read holds a
/// bounded amount of memory however large the broadcasts are.
package final class OutboundBudget: Sendable {
    private struct State {
        var total = 0
        /// What each open channel has waiting; a closed channel is absent, and takes nothing more.
        var channels: [ObjectIdentifier: Int] = [:]
    }

    package let maximumBytes: Int
    private let state = Mutex(State())

    package init(maximumBytes: Int) {
        self.maximumBytes = maximumBytes
    }

    /// The bytes waiting now, across the socket's channels.
    package var queuedBytes: Int { state.withLock { $0.total } }

    /// Starts counting for `channel`.
    package func open(_ channel: ObjectIdentifier) {
        state.withLock { $0.channels[channel] = 0 }
    }

    /// Takes `bytes` for a frame queued to `channel`; false when the socket's
    /// budget has no room, or the channel is closed: the frame is missed.
    package func reserve(_ bytes: Int, for channel: ObjectIdentifier) -> Bool {
        state.withLock { state in
            guard let queued = state.channels[channel], state.total + bytes <= maximumBytes else { return false }
            state.channels[channel] = queued + bytes
            state.total += bytes
            return true
        }
    }

    /// Gives back a frame's `bytes` once it is written, or was not queued after all.
    package func release(_ bytes: Int, for channel: ObjectIdentifier) {
        state.withLock { state in
            guard let queued = state.channels[channel] else { return }
            state.channels[channel] = queued - bytes
            state.total -= bytes
        }
    }

    /// Gives back everything `channel` had waiting: its inbox is gone, unread.
    package func close(_ channel: ObjectIdentifier) {
        state.withLock { state in
            state.total -= state.channels.removeValue(forKey: channel) ?? 0
        }
    }
}

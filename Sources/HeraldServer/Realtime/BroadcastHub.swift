import HeraldRealtime
import Synchronization

/// The members of each broadcast topic on this daemon, and the hand-off of
/// a message to them. A member's frames wait in a bounded inbox that its
/// channel's task writes out; a member that stops reading misses what comes
/// once its inbox is full, and never slows the sender or the others.
final class BroadcastHub: Sendable {
    private struct Member: Sendable {
        let framing: PhoenixFraming
        /// `self`: it receives what its own channel sends.
        let echo: Bool
        let inbox: AsyncStream<[UInt8]>.Continuation
    }

    /// A topic as clients join it (`realtime:NAME`): a private topic and a
    /// public one of the same name are apart, so that joining the public one
    /// never reaches what only callers granted the private one may see.
    struct Topic: Sendable, Hashable {
        var name: String
        var isPrivate: Bool
    }

    /// Frames a member may have waiting.
    static let backlog = 1024
    private let topics = Mutex<[Topic: [ObjectIdentifier: Member]]>([:])

    /// Adds `channel` to `topic`; its frames, until ``leave(_:channel:)``.
    func join(_ topic: Topic, channel: ObjectIdentifier, framing: PhoenixFraming, echo: Bool) -> AsyncStream<[UInt8]> {
        let (frames, inbox) = AsyncStream<[UInt8]>.makeStream(bufferingPolicy: .bufferingOldest(Self.backlog))
        let replaced = topics.withLock { topics in
            topics[topic, default: [:]].updateValue(Member(framing: framing, echo: echo, inbox: inbox), forKey: channel)
        }
        replaced?.inbox.finish()
        return frames
    }

    func leave(_ topic: Topic, channel: ObjectIdentifier) {
        let member = topics.withLock { topics -> Member? in
            let member = topics[topic]?.removeValue(forKey: channel)
            if topics[topic]?.isEmpty == true { topics[topic] = nil }
            return member
        }
        member?.inbox.finish()
    }

    /// Hands `message` to every member of `topic` but `sender` (unless that one asked for `self`).
    /// - Returns: how many members took it, and how many had a full inbox and missed it.
    @discardableResult
    func publish(_ message: PhoenixMessage, to topic: Topic, from sender: ObjectIdentifier?) -> (delivered: Int, missed: Int) {
        let members = topics.withLock { $0[topic] ?? [:] }
        var frames: [PhoenixFraming: [UInt8]] = [:]
        var delivered = 0
        var missed = 0
        for (id, member) in members where id != sender || member.echo {
            let frame = frames[member.framing] ?? member.framing.encode(message)
            frames[member.framing] = frame
            if case .enqueued = member.inbox.yield(frame) { delivered += 1 } else { missed += 1 }
        }
        return (delivered, missed)
    }
}

/// How often a socket stream may be written: key `socket.write_rate`.
///
/// Each write costs a system call and a wake-up of its reader, whatever its
/// size. While an event loop keeps up, every batch goes out at once; once
/// write work would put it behind, fewer, larger writes keep latency bounded
/// where one write per event would overload the machine.
public enum WritePacing: Sendable, Hashable {
    /// `auto`, the default: every batch at once while the stream's event loop
    /// runs what is due on time; once it runs ``lateLoop`` late, streams are
    /// spaced as at ``adaptiveRate`` writes per second for all of them together.
    case adaptive
    /// `0`: every batch at once, however late the loop.
    case unpaced
    /// A number: at most this many writes per second for all streams together, always.
    case ceiling(Int)

    /// The rate the streams share while their loop runs late, under ``adaptive``.
    public static let adaptiveRate = 50_000
    /// How late an event loop runs what is due before ``adaptive`` spaces its streams.
    public static let lateLoop: Duration = .milliseconds(1)

    /// How long a stream waits after a write before its next one, with
    /// `openStreams` open and its event loop running `loopLag` late; nil: no wait.
    public func spacing(openStreams: Int, loopLag: Duration) -> Duration? {
        switch self {
        case .unpaced: nil
        case .ceiling(let rate): .seconds(openStreams) / rate
        case .adaptive: loopLag >= Self.lateLoop ? .seconds(openStreams) / Self.adaptiveRate : nil
        }
    }
}

extension WritePacing {
    /// `auto`, `0` or a positive number of writes per second; nil for anything else.
    public init?(_ text: String) {
        switch text.trimmingCharacters(in: .whitespaces) {
        case "auto": self = .adaptive
        case "0": self = .unpaced
        case let number:
            guard let rate = Int(number), rate > 0 else { return nil }
            self = .ceiling(rate)
        }
    }
}

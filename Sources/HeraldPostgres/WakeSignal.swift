#if canImport(Glibc)
import Glibc
#endif

/// A pipe whose read end becomes readable, for good, once signalled.
///
/// The listener thread polls it next to the database socket, so shutdown
/// interrupts a blocking wait at once.
final class WakeSignal: Sendable {
    let fileDescriptor: Int32
    private let writeEnd: Int32

    init() {
        var ends: [Int32] = [-1, -1]
        precondition(pipe(&ends) == 0, "pipe failed: errno \(errno)")
        for end in ends {
            _ = fcntl(end, F_SETFD, FD_CLOEXEC)
            _ = fcntl(end, F_SETFL, O_NONBLOCK)
        }
        fileDescriptor = ends[0]
        writeEnd = ends[1]
    }

    deinit {
        close(fileDescriptor)
        close(writeEnd)
    }

    func signal() {
        var byte: UInt8 = 1
        // A full pipe already wakes every reader, so a failed write changes nothing.
        _ = write(writeEnd, &byte, 1)
    }

    enum WaitResult {
        case ready
        case woken
        case timedOut
    }

    /// Waits until the signal fires or `deadline` passes.
    func wait(until deadline: ContinuousClock.Instant?) -> WaitResult {
        Self.wait(for: nil, wake: self, until: deadline)
    }

    /// Waits until `socket` has any of `events`, `wake` fires, or `deadline` passes.
    static func wait(
        for socket: Int32?,
        events: Int16 = Int16(POLLIN),
        wake: WakeSignal?,
        until deadline: ContinuousClock.Instant?
    ) -> WaitResult {
        var descriptors: [pollfd] = []
        if let socket { descriptors.append(pollfd(fd: socket, events: events, revents: 0)) }
        if let wake { descriptors.append(pollfd(fd: wake.fileDescriptor, events: Int16(POLLIN), revents: 0)) }
        while true {
            let timeout = deadline.map { milliseconds(until: $0) } ?? -1
            let ready = poll(&descriptors, nfds_t(descriptors.count), timeout)
            if ready < 0 {
                if errno == EINTR { continue }
                preconditionFailure("poll failed: errno \(errno)")
            }
            if wake != nil, descriptors[descriptors.count - 1].revents != 0 { return .woken }
            if socket != nil, descriptors[0].revents != 0 { return .ready }
            if ready == 0 { return .timedOut }
        }
    }

    private static func milliseconds(until deadline: ContinuousClock.Instant) -> Int32 {
        let remaining = ContinuousClock.now.duration(to: deadline)
        if remaining <= .zero { return 0 }
        let (seconds, attoseconds) = remaining.components
        // Round up, so a wait never ends just before its deadline.
        return Int32(clamping: seconds * 1000 + (attoseconds + 999_999_999_999_999) / 1_000_000_000_000_000)
    }
}

#if canImport(Glibc)
import Glibc
#endif
import Dispatch
import Synchronization
public import Herald
public import Logging
public import ServiceLifecycle

/// Prints every event to standard output, as JSON lines or readable one-liners.
///
/// It subscribes when created, so it sees every event published after that.
/// On graceful shutdown it prints what it has buffered, then ends; run it
/// before the listener in a `ServiceGroup` so the listener stops first.
/// Whatever is buffered is written with one system call, on a queue of its
/// own, so a slow reader of stdout never blocks the async runtime.
public final class StdoutOutput: Service, Sendable {
    let broker: Broker
    /// A reload may switch between json and pretty.
    let format: Mutex<StdoutFormat>
    let formatter: PrettyEventFormatter
    let logger: Logger
    /// Replaced after an overflow; graceful shutdown cancels whichever is current.
    let subscription: Mutex<Subscription>
    /// Events written since start.
    let printed = Mutex<UInt64>(0)
    private let queue = DispatchQueue(label: "pgherald.stdout")

    /// - Parameter colour: colour the pretty format; `nil` means "when stdout is a terminal and NO_COLOR is unset".
    public init(broker: Broker, format: StdoutFormat, colour: Bool? = nil, logger: Logger) {
        self.broker = broker
        self.format = Mutex(format)
        self.formatter = PrettyEventFormatter(colour: colour ?? (isatty(STDOUT_FILENO) == 1 && getenv("NO_COLOR") == nil))
        self.logger = logger
        self.subscription = Mutex(broker.subscribe(kind: "stdout"))
    }

    public func run() async throws {
        try await withGracefulShutdownHandler {
            try await printEvents()
        } onGracefulShutdown: {
            self.subscription.withLock { $0 }.cancel()
        }
    }

    private func printEvents() async throws {
        while true {
            do {
                let batch = try await subscription.withLock { $0 }.nextBatch()
                if batch.isEmpty { return }
                guard await write(render(batch)) else {
                    logger.error("stdout is closed; no longer printing events")
                    return
                }
                printed.withLock { $0 += UInt64(batch.count) }
            } catch {
                if Task.isShuttingDownGracefully { return }
                logger.error("stdout fell behind and missed events; continuing with new ones", metadata: ["error": "\(error)"])
                subscription.withLock { $0 = broker.subscribe(kind: "stdout") }
            }
        }
    }

    /// Prints the next batches in `format`.
    public func setFormat(_ format: StdoutFormat) {
        self.format.withLock { $0 = format }
    }

    func render(_ events: [Event]) -> [UInt8] {
        var bytes: [UInt8] = []
        let format = self.format.withLock { $0 }
        for event in events {
            switch format {
            case .json: bytes += event.jsonBytes
            case .pretty: bytes += formatter.line(for: event).utf8
            }
            bytes.append(UInt8(ascii: "\n"))
        }
        return bytes
    }

    /// Writes everything; returns false if stdout is gone (EPIPE or another error).
    private func write(_ bytes: [UInt8]) async -> Bool {
        await withCheckedContinuation { continuation in
            queue.async {
                continuation.resume(returning: Self.writeAll(bytes, to: STDOUT_FILENO))
            }
        }
    }

    private static func writeAll(_ bytes: [UInt8], to descriptor: Int32) -> Bool {
        bytes.withUnsafeBytes { buffer in
            var offset = 0
            while offset < buffer.count {
                let written = Glibc.write(descriptor, buffer.baseAddress! + offset, buffer.count - offset)
                if written < 0 && errno == EINTR { continue }
                guard written > 0 else { return false }
                offset += written
            }
            return true
        }
    }
}

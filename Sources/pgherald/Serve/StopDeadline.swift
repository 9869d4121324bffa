import Foundation
import Herald
import Logging
import ServiceLifecycle

/// Bounds a graceful stop. Last in `serve`'s group, so it hears the stop
/// first; from then, the group cancels what is still stopping at
/// `grace` minus a second, and at `grace` this exits the process: a peer
/// that never reads or never answers cannot hold a stop that systemd and
/// operators expect to be short.
struct StopDeadline: Service {
    let grace: Duration
    let logger: Logger

    /// The group's own escalation from a graceful stop to cancellation.
    static func cancellation(grace: Duration) -> Duration {
        grace - .seconds(1)
    }

    func run() async throws {
        do {
            try await gracefulShutdown()
        } catch {
            // Cancelled: the group is ending on its own, with no stop to bound.
            return
        }
        let grace = grace
        let logger = logger
        let started = ContinuousClock.now
        Thread.detachNewThread {
            Thread.sleep(until: Date(timeIntervalSinceNow: Double(grace.components.seconds) + Double(grace.components.attoseconds) / 1e18))
            logger.warning("still stopping after stop_grace; exiting now, and durable outputs resume from their cursors at the next start", metadata: [
                "stop_grace": "\(grace.secondsText)", "stopping_for": "\((ContinuousClock.now - started).secondsText)",
            ])
            exit(0)
        }
    }
}

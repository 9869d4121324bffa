import Foundation
import Herald
import Logging
import ServiceLifecycle

/// Bounds a stop, graceful or after a failure. Last in `serve`'s group, so
/// it hears the stop first; from then, the group cancels what is still
/// stopping at `grace` minus a second, and at `grace` this exits the
/// process: a peer that never reads or never answers, or a service that
/// ignores its stop, cannot hold a stop that systemd and operators expect
/// to be short. A stop after a failure exits 1, with the failure's line.
struct StopDeadline: Service {
    let grace: Duration
    let failures: FirstFailure
    let logger: Logger

    /// The group's own escalation from a graceful stop to cancellation.
    static func cancellation(grace: Duration) -> Duration {
        grace - .seconds(1)
    }

    func run() async throws {
        // Cancelled: the group is ending without a graceful stop, which only a failure does.
        let cancelled = (try? await gracefulShutdown()) == nil
        let grace = grace
        let failures = failures
        let logger = logger
        let started = ContinuousClock.now
        Thread.detachNewThread {
            Thread.sleep(until: Date(timeIntervalSinceNow: Double(grace.components.seconds) + Double(grace.components.attoseconds) / 1e18))
            let failed = cancelled || failures.hasFailed
            logger.warning("still stopping after stop_grace; exiting now, and durable outputs resume from their cursors at the next start", metadata: [
                "stop_grace": "\(grace.secondsText)", "stopping_for": "\((ContinuousClock.now - started).secondsText)",
            ])
            failures.print()
            exit(failed ? EXIT_FAILURE : EXIT_SUCCESS)
        }
    }
}

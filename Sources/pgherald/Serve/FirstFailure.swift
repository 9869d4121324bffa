import Foundation
import HeraldPostgres
import HeraldSettings
import ServiceLifecycle
import Synchronization

/// The first error a service of `serve`'s group threw: why a failed run
/// stops. It is printed once, as the one line that names the cause, whether
/// the group ends in time (``Serve``) or ``StopDeadline`` ends the process.
final class FirstFailure: Sendable {
    private struct State {
        var cause: (any Error)?
        var printed = false
    }

    private let state = Mutex(State())

    /// Whether a service has failed.
    var hasFailed: Bool { state.withLock { $0.cause != nil } }

    /// Remembers `error` when it is the first.
    func record(_ error: any Error) {
        state.withLock { state in
            if state.cause == nil { state.cause = error }
        }
    }

    /// Prints `Error: <cause>` to stderr, once whoever asks first: `error`
    /// when given (the group's own answer), else the first recorded.
    func print(_ error: (any Error)? = nil) {
        let line = state.withLock { state -> String? in
            guard !state.printed, let cause = error ?? state.cause else { return nil }
            state.printed = true
            return "Error: \(Self.words(cause))\n"
        }
        if let line { FileHandle.standardError.write(Data(line.utf8)) }
    }

    /// The exit status for a failed run: 78 (EX_CONFIG) for what only a change of configuration or
    /// of grants mends, which systemd then does not restart in vain (RestartPreventExitStatus);
    /// 1 for what may pass, such as a server that is down.
    static func exitCode(for error: any Error) -> Int32 {
        if error is ConfigurationError { return ConfigurationError.exitCode }
        // insufficient_privilege, invalid_authorization_specification, invalid_password.
        if let failure = error as? LibpqError, ["42501", "28000", "28P01"].contains(failure.sqlState ?? "") { return ConfigurationError.exitCode }
        return 1
    }

    /// An error in the words ArgumentParser would print it with.
    static func words(_ error: any Error) -> String {
        (error as? any LocalizedError)?.errorDescription ?? String(describing: error)
    }

    /// `service`, with what it throws recorded here.
    func watching(_ service: any Service) -> any Service {
        Watched(service: service, failures: self)
    }

    /// A service whose error is recorded as it is thrown, before the group has heard it.
    struct Watched: Service {
        let service: any Service
        let failures: FirstFailure

        func run() async throws {
            do {
                try await service.run()
            } catch {
                // One that ends because the group cancels it is not the cause.
                if !(error is CancellationError) { failures.record(error) }
                throw error
            }
        }
    }
}

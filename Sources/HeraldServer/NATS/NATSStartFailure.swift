import HeraldNATS

/// The NATS output could not start: nothing listens at any server of
/// `nats.servers` (see ``NATSOutput/FirstRound``).
struct NATSStartFailure: Error, CustomStringConvertible {
    /// Each server's refusal, in the order they were tried.
    var refusals: [NATSError]

    var description: String {
        "nats.servers: no NATS server takes the output's connection (\(refusals.map(\.message).joined(separator: "; "))); start NATS, or correct nats.servers"
    }
}

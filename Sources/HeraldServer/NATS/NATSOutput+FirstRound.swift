import HeraldNATS

extension NATSOutput {
    /// The first attempt at each server of `nats.servers`, before any has
    /// taken a connection. If nothing listens at any of them, NATS is down
    /// or the addresses are wrong, and the output cannot start: it says so,
    /// as a first database connection that fails does, and under systemd
    /// `Restart=on-failure` does the retrying. A server that refuses the
    /// credentials or lacks the stream is reported in `/stats` while events
    /// wait in the journal, and one that is slow to answer may be starting:
    /// both are waited for.
    struct FirstRound {
        let servers: Int
        /// Each server's refusal so far; nil once the round no longer decides.
        private(set) var refusals: [NATSError]? = []

        init(servers: Int) {
            self.servers = servers
        }

        /// Whether every server tried so far refused the connection, and none took one.
        var isOpen: Bool { refusals != nil }

        /// A connection ended with `error`; returns every server's refusal
        /// once each has refused: the start has failed.
        mutating func failed(connected: Bool, _ error: any Error) -> [NATSError]? {
            guard var seen = refusals else { return nil }
            guard !connected, let refusal = error as? NATSError, refusal.code == .notListening else {
                refusals = nil
                return nil
            }
            seen.append(refusal)
            refusals = seen
            return seen.count >= servers ? seen : nil
        }

        /// A server took the connection: from now on, failures are waited out.
        mutating func connected() {
            refusals = nil
        }
    }
}

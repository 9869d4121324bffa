package import HeraldNATS

/// The first attempt at each NATS server a client is configured with,
/// before any has taken a connection. If nothing listens at any of them,
/// NATS is down or the addresses are wrong, and the client cannot start: it
/// says so, as a first database connection that fails does, and under
/// systemd `Restart=on-failure` does the retrying. Once a server has taken
/// a connection, and for a server that refuses the credentials, lacks the
/// stream or is slow to answer (it may be starting), failures are waited
/// out with backoff.
package struct NATSFirstRound {
    let servers: Int
    /// Each server's refusal so far; nil once the round no longer decides.
    private(set) var refusals: [NATSError]? = []

    package init(servers: Int) {
        self.servers = servers
    }

    /// Whether every server tried so far refused the connection, and none took one.
    var isOpen: Bool { refusals != nil }

    /// A connection ended with `error`; returns every server's refusal
    /// once each has refused: the start has failed.
    package mutating func failed(connected: Bool, _ error: any Error) -> [NATSError]? {
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
    package mutating func connected() {
        refusals = nil
    }
}

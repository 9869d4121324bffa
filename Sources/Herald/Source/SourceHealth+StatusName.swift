extension SourceHealth.Status {
    /// The state's one spelling, the same in logs, `/stats`, `/healthz`,
    /// `pgherald_listener_state` and `systemctl status`.
    public var name: String {
        switch self {
        case .notStarted, .connecting: "connecting"
        case .catchingUp: "catching_up"
        case .listening: "listening"
        case .reconnecting: "reconnecting"
        case .stopped: "stopped"
        }
    }

    /// Every value ``name`` takes, in the order a connection passes through them.
    public static let names = ["connecting", "catching_up", "listening", "reconnecting", "stopped"]
}

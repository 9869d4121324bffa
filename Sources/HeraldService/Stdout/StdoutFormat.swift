/// How the stdout subscriber prints events.
public enum StdoutFormat: String, Sendable, Hashable, CaseIterable {
    /// One event per line, in the shared JSON shape.
    case json
    /// One readable line per event; coloured only on a terminal.
    case pretty
}

public import Logging

/// The categories pgherald logs under; each is a logger label with its own level.
public enum LogCategory: String, Sendable, CaseIterable {
    case database
    case broker
    case socket
    case webhook
    case realtime
    case eventlog
    case nats
    case cluster
    case queries
    case lifecycle
    case config

    /// A logger for this category; levels and format come from ``LoggingSetup``.
    public var logger: Logger { Logger(label: rawValue) }
}

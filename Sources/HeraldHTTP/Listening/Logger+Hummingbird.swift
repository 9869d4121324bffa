package import Logging

extension Logger {
    /// The logger to hand Hummingbird: its own info lines ("Server started and listening on …") would repeat
    /// the line each server logs when it serves, with what was applied (mode, group, address); and what it
    /// logs as errors when its task is cancelled in a stop ("Waiting on child channel: CancellationError()",
    /// "Server shutdown error: Already closed") is a stop's way, not a fault, so it goes to debug. Its
    /// other warnings and errors still come through.
    package var forHummingbird: Logger {
        var quieter = Logger(label: label) { _ in StopNoiseHandler(inner: self) }
        quieter.logLevel = max(logLevel, .notice)
        return quieter
    }
}

/// Hands records on to `inner`, lowering Hummingbird's errors about a cancelled or closed server to debug.
private struct StopNoiseHandler: LogHandler {
    var inner: Logger
    var metadata: Logger.Metadata = [:]
    var logLevel: Logger.Level = .notice

    subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { metadata[key] }
        set { metadata[key] = newValue }
    }

    func log(event: LogEvent) {
        let text = event.message.description
        let isStopNoise = text.hasSuffix("CancellationError()") || text.hasSuffix("Already closed")
        var merged = metadata
        if let extra = event.metadata { merged.merge(extra) { $1 } }
        inner.log(level: isStopNoise ? .debug : event.level, event.message, metadata: merged, source: event.source, file: event.file, function: event.function, line: event.line)
    }
}

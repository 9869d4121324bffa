package import Logging

extension Logger {
    /// The logger to hand Hummingbird: its own info lines ("Server started and listening on …") would repeat
    /// the line each server logs when it serves, with what was applied (mode, group, address); its
    /// warnings and errors still come through.
    package var forHummingbird: Logger {
        var quieter = self
        quieter.logLevel = max(logLevel, .notice)
        return quieter
    }
}

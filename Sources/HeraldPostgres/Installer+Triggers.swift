extension Installer {
    /// Which functions the statement triggers call.
    ///
    /// The native library (`native/`, built and installed on the database
    /// server) publishes a single-row statement, the common case, in C and
    /// hands every other statement to the plpgsql functions, so the events
    /// are the same either way. Managed databases, which do not take a C
    /// library, run plpgsql.
    public enum Triggers: String, Sendable, CaseIterable {
        /// Native where the server has the library and the installer is a
        /// superuser, plpgsql otherwise. The default on a first install.
        case auto
        /// Native, or the install fails and says why.
        case native
        /// plpgsql alone, even where the library is installed.
        case plpgsql
    }

    /// Whether the installed statement triggers call the native library.
    public static func usesNativeTriggers(on connection: LibpqConnection) throws(LibpqError) -> Bool {
        try connection.execute("SELECT pgherald.native_triggers()").scalar == "t"
    }
}

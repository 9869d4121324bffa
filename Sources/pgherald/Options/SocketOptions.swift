import ArgumentParser
import Foundation
import Herald
import HeraldAPI
import HeraldSettings

/// The daemon's socket, `--socket`: where `serve` puts it, and where the
/// client commands look first.
struct SocketPathOption: ParsableArguments {
    @Option(
        name: .customLong("socket"),
        help: ArgumentHelp(
            "The daemon's Unix socket. Key: socket.path.",
            discussion: "Default: socket.path from PGHERALD_SOCKET_PATH or the configuration file, else $RUNTIME_DIRECTORY/pgherald.sock, else $XDG_RUNTIME_DIR/pgherald.sock, else /tmp/pgherald-UID/pgherald.sock (made mode 0700 for the user).",
            valueName: "path"
        )
    )
    var socket: String?
}

/// Where the daemon's socket is, for the client commands (`status`, `tail`,
/// `demo`), found as the daemon finds it: `--socket`, else `socket.path`
/// from `PGHERALD_SOCKET_PATH`, `--config` or /etc/pgherald/pgherald.yaml,
/// else the default.
struct DaemonSocketOptions: ParsableArguments {
    @OptionGroup var socketPath: SocketPathOption

    @Option(
        name: .customLong("config"),
        help: ArgumentHelp(
            "The daemon's configuration file, for its socket.path. Default: /etc/pgherald/pgherald.yaml, when this user may read it.",
            valueName: "path"
        )
    )
    var config: String?

    /// The socket's path.
    /// - Throws: `ExitCode(78)` with the reason on stderr when `--config` names a file that cannot be read.
    func path() async throws -> String {
        if let socket = socketPath.socket { return socket }
        let environment = ProcessInfo.processInfo.environment
        do {
            let sources = ConfigurationSources(file: config ?? ConfigurationSources.defaultFile, fileRequired: config != nil, environment: environment)
            return try await Self.socketPath(from: sources)
        } catch where config == nil {
            // The service's file is usually readable by its group alone; without it the environment and the default decide.
            return (try? await Self.socketPath(from: ConfigurationSources(file: nil, fileRequired: false, environment: environment)))
                ?? SocketConfiguration.defaultPath(environment: environment)
        } catch {
            FileHandle.standardError.write(Data("Error: configuration: \(error)\n".utf8))
            throw ExitCode(ConfigurationError.exitCode)
        }
    }

    private static func socketPath(from sources: ConfigurationSources) async throws(ConfigurationError) -> String {
        let settings = try await SettingsReader(sources: sources)
        return settings.string("socket.path", default: SocketConfiguration.defaultPath(environment: sources.environment))
    }
}

/// The filter flags shared by `tail` and `demo`, in the query language of `GET /events`.
struct FilterOptions: ParsableArguments {
    @Option(name: .customLong("table"), help: "Only this table (TABLE or SCHEMA.TABLE); repeatable.")
    var tables: [String] = []

    @Option(name: .customLong("op"), help: "Only this operation (INSERT, UPDATE, DELETE, TRUNCATE); repeatable.")
    var operations: [String] = []

    @Option(name: .customLong("where"), help: "Condition COLUMN.OP.VALUE or COLUMN.not.OP.VALUE (eq, neq, lt, lte, gt, gte, in, is, like, ilike); repeatable.")
    var conditions: [String] = []

    func filter() throws -> EventFilter {
        let items = tables.map { (name: "table", value: $0) } + operations.map { ("op", $0) } + conditions.map { ("where", $0) }
        do {
            return try FilterQuery.parse(items)
        } catch {
            throw ValidationError("--\(error.parameter): \(error.message)")
        }
    }
}

import ArgumentParser
import Foundation
import Herald
import HeraldServer

/// Where the daemon's socket is, for the client commands.
struct SocketPathOption: ParsableArguments {
    @Option(
        name: .customLong("socket"),
        help: ArgumentHelp(
            "The daemon's Unix socket.",
            discussion: "Default: $RUNTIME_DIRECTORY/pgherald.sock, else $XDG_RUNTIME_DIR/pgherald.sock, else ./pgherald.sock.",
            valueName: "path"
        )
    )
    var socket: String?

    var path: String {
        socket ?? SocketConfiguration.defaultPath(environment: ProcessInfo.processInfo.environment)
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

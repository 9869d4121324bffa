public import Herald

/// Applies and removes pgherald's publisher SQL (`sql/install.sql`, `sql/uninstall.sql`).
public enum Installer {
    /// A table whose changes are published.
    public struct WatchedTable: Sendable, Hashable, CustomStringConvertible {
        public var table: TableName
        /// Columns carried in each event's `pk`; empty for tables without a primary key.
        public var primaryKey: [String]

        public var description: String {
            primaryKey.isEmpty ? "\(table) (no primary key: events carry no pk)"
                : "\(table) (pk: \(primaryKey.joined(separator: ", ")))"
        }
    }

    /// Installs or upgrades the publisher in one transaction and watches `schemas`
    /// (default: `public` on a first install, else whatever was watched before).
    ///
    /// - Parameters:
    ///   - durability: whether the triggers write the journal; default:
    ///     durable on a first install, else what was installed before.
    ///   - triggers: which functions the statement triggers call; default:
    ///     ``Triggers/auto`` on a first install, else what was asked before.
    /// - Returns: the tables that publish now.
    @discardableResult
    public static func install(
        on connection: LibpqConnection,
        schemas: [String] = [],
        durability: Durability? = nil,
        triggers: Triggers? = nil
    ) throws(LibpqError) -> [WatchedTable] {
        try connection.inTransaction { () throws(LibpqError) in
            if let durability {
                try connection.execute("SELECT set_config('pgherald.durability', $1, true)", parameters: [durability.rawValue])
            }
            if let triggers {
                try connection.execute("SELECT set_config('pgherald.triggers', $1, true)", parameters: [triggers.rawValue])
            }
            if !schemas.isEmpty {
                var writer = JSONWriter()
                writer.write(.array(schemas.map(JSONValue.string)))
                let list = String(decoding: writer.bytes, as: UTF8.self)
                try connection.execute("SELECT set_config('pgherald.schemas', $1, true)", parameters: [list])
            }
            try connection.execute(String(decoding: PackageResources.install_sql, as: UTF8.self))
        }
        return try watchedTables(on: connection)
    }

    /// Removes every pgherald trigger and the `pgherald` schema; user data is untouched.
    public static func uninstall(on connection: LibpqConnection) throws(LibpqError) {
        try connection.inTransaction { () throws(LibpqError) in
            try connection.execute(String(decoding: PackageResources.uninstall_sql, as: UTF8.self))
        }
    }

    /// The tables that publish now.
    public static func watchedTables(on connection: LibpqConnection) throws(LibpqError) -> [WatchedTable] {
        let result = try connection.execute("""
            SELECT schema_name, table_name, coalesce(array_to_json(primary_key), '[]')::text
              FROM pgherald.watched_tables()
            """)
        return result.rows.map { row in
            let columns = (try? JSONParser.parse(row[2] ?? "[]"))
                .flatMap { value -> [String]? in
                    guard case .array(let names) = value else { return nil }
                    return names.compactMap(\.stringValue)
                } ?? []
            return WatchedTable(table: TableName(schema: row[0] ?? "", name: row[1] ?? ""), primaryKey: columns)
        }
    }
}

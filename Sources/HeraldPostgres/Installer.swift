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

    /// The publisher's SQL by object (`sql/install/`), in the order it is
    /// applied. Each part is idempotent and upgrades its objects in place, so
    /// the whole is both the install and the upgrade from any earlier version.
    public static let installParts: [(file: String, sql: [UInt8])] = [
        ("part01-schema.sql", PackageResources.part01_schema_sql),
        ("part02-settings.sql", PackageResources.part02_settings_sql),
        ("part03-journal.sql", PackageResources.part03_journal_sql),
        ("part04-webhooks.sql", PackageResources.part04_webhooks_sql),
        ("part05-output-cursors.sql", PackageResources.part05_output_cursors_sql),
        ("part06-row-triggers.sql", PackageResources.part06_row_triggers_sql),
        ("part07-statement-triggers.sql", PackageResources.part07_statement_triggers_sql),
        ("part08-attach.sql", PackageResources.part08_attach_sql),
        ("part09-native.sql", PackageResources.part09_native_sql),
        ("part10-event-trigger.sql", PackageResources.part10_event_trigger_sql),
        ("part11-access.sql", PackageResources.part11_access_sql),
    ]

    /// What `install` applies: the parts joined, byte for byte `sql/install.sql`.
    public static var installScript: String {
        String(decoding: installParts.flatMap(\.sql), as: UTF8.self)
    }

    /// Installs or upgrades the publisher in one transaction and watches `schemas`
    /// (default: `public` on a first install, else whatever was watched before).
    ///
    /// - Parameters:
    ///   - durability: whether the triggers write the journal; default:
    ///     durable on a first install, else what was installed before.
    ///   - triggers: which functions the statement triggers call; default:
    ///     ``Triggers/auto`` on a first install, else what was asked before.
    ///   - daemonRoles: roles to grant what serve needs, kept for later installs too.
    /// - Returns: the tables that publish now.
    @discardableResult
    public static func install(
        on connection: LibpqConnection,
        schemas: [String] = [],
        durability: Durability? = nil,
        triggers: Triggers? = nil,
        daemonRoles: [String] = []
    ) throws(LibpqError) -> [WatchedTable] {
        try explainingPrivileges(installPrivilegeHint) { () throws(LibpqError) in
            try connection.inTransaction { () throws(LibpqError) in
                if let durability {
                    try connection.execute("SELECT set_config('pgherald.durability', $1, true)", parameters: [durability.rawValue])
                }
                if let triggers {
                    try connection.execute("SELECT set_config('pgherald.triggers', $1, true)", parameters: [triggers.rawValue])
                }
                for (setting, names) in [("pgherald.schemas", schemas), ("pgherald.daemon_roles", daemonRoles)] where !names.isEmpty {
                    var writer = JSONWriter()
                    writer.write(.array(names.map(JSONValue.string)))
                    try connection.execute("SELECT set_config($1, $2, true)", parameters: [setting, String(decoding: writer.bytes, as: UTF8.self)])
                }
                try connection.execute(installScript)
            }
        }
        return try watchedTables(on: connection)
    }

    /// The roles granted what serve needs (`install --daemon-role`) that still exist, by name.
    public static func daemonRoles(on connection: LibpqConnection) throws(LibpqError) -> [String] {
        try connection.execute("""
            SELECT role_name FROM pgherald.daemon_role WHERE EXISTS (SELECT 1 FROM pg_roles WHERE rolname = role_name) ORDER BY 1
            """).rows.compactMap { $0[0] }
    }

    /// Removes every pgherald trigger and the `pgherald` schema; user data is untouched.
    public static func uninstall(on connection: LibpqConnection) throws(LibpqError) {
        try explainingPrivileges(uninstallPrivilegeHint) { () throws(LibpqError) in
            try connection.inTransaction { () throws(LibpqError) in
                try connection.execute(String(decoding: PackageResources.uninstall_sql, as: UTF8.self))
            }
        }
    }

    /// The tables that publish now.
    public static func watchedTables(on connection: LibpqConnection) throws(LibpqError) -> [WatchedTable] {
        let result = try connection.execute("""
            SELECT schema_name, table_name, coalesce(array_to_json(primary_key), '[]')::text AS primary_key
              FROM pgherald.watched_tables()
            """)
        return try result.decode(WatchedTable.self)
    }
}

extension Installer.WatchedTable: RowDecodable {
    /// From a row of `pgherald.watched_tables()`, with `primary_key` as a JSON array.
    public init(row: ResultRow) throws(LibpqError) {
        let key = (try? JSONParser.parse(try row.text("primary_key") ?? "[]"))
            .flatMap { value -> [String]? in
                guard case .array(let names) = value else { return nil }
                return names.compactMap(\.stringValue)
            } ?? []
        self.init(table: TableName(schema: try row.value("schema_name"), name: try row.value("table_name")), primaryKey: key)
    }
}

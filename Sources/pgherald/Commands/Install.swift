import ArgumentParser
import Foundation
import Herald
import HeraldPostgres

struct Install: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Install or upgrade the publishing triggers and list the watched tables.",
        discussion: """
            Applies sql/install.sql in one transaction. Safe to run again: it upgrades in place \
            and keeps earlier choices. Every table of the watched schemas gets the triggers, and \
            so do tables created later (that needs a superuser; otherwise run \
            SELECT pgherald.attach_all() after creating tables).
            """
    )

    @OptionGroup var database: DatabaseOptions

    @Option(
        name: .customLong("schema"),
        help: "Schema to watch; repeat for several. Default: public on a first install, else the schemas watched before."
    )
    var schemas: [String] = []

    @Option(help: ArgumentHelp(
        "durable: triggers write each event to the pgherald.journal table, so nothing is lost while the daemon is away, and notify only to wake a parked daemon; notify-only: NOTIFY alone, in every write, and events sent while no daemon listens are lost.",
        discussion: "Default: durable on a first install, else what was installed before. Notify-only is not cheaper with many writers: PostgreSQL commits notifying transactions one at a time, behind one lock held through the commit's flush, so it caps the database at a few thousand commits per second; durable with a short --retention keeps little and spares writers that lock.",
        valueName: "durable|notify-only"
    ))
    var durability: Durability?

    @Option(help: ArgumentHelp(
        "native: the statement triggers publish single-row statements with pgherald's C library, which must be installed on the database server (make -C native install) and needs a superuser to install; plpgsql: no library, as managed databases need; auto: native where it can be, else plpgsql.",
        discussion: "Default: auto on a first install, else what was asked before. Both kinds write the same events.",
        valueName: "auto|native|plpgsql"
    ))
    var triggers: Installer.Triggers?

    @Option(
        name: .customLong("daemon-role"),
        help: ArgumentHelp(
            "A database role that runs serve without owning the pgherald schema; repeat for several.",
            discussion: "It gets what serve needs in the pgherald schema (reading the journal and emptying its parts, cursors, checkpoints, the functions), and every later install grants it what that install adds. Default: none; serve then runs as the role that installs, or as a superuser. The role must exist (CREATE ROLE pgherald LOGIN). Row-level security checks need more: check-config --connect says which.",
            valueName: "role"
        )
    )
    var daemonRoles: [String] = []

    func run() throws {
        let connection = try LibpqConnection.connect(database.connectionStringWarningOnStderr())
        let tables = try Installer.install(on: connection, schemas: schemas, durability: durability, triggers: triggers, daemonRoles: daemonRoles)
        for notice in connection.takeNotices() where notice.severity == "WARNING" {
            FileHandle.standardError.write(Data("warning: \(notice.message)\(notice.hint.map { ": \($0)" } ?? "")\n".utf8))
        }
        let installed = try Journal.installedDurability(on: connection)?.rawValue ?? "?"
        let kind = try Installer.usesNativeTriggers(on: connection) ? "native" : "plpgsql"
        print("pgherald publisher installed, \(installed), \(kind) triggers (\(connection.endpointDescription))")
        let granted = try Installer.daemonRoles(on: connection)
        if !granted.isEmpty {
            print("serve may run as \(granted.joined(separator: ", ")) (--daemon-role), as well as the schema's owner")
        }
        if installed == Durability.notifyOnly.rawValue {
            FileHandle.standardError.write(Data("warning: \(Durability.notifyOnlyCeiling)\n".utf8))
        }
        print("watching \(tables.count) table\(tables.count == 1 ? "" : "s"):")
        for table in tables { print("  \(table)") }
    }
}

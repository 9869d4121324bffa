import ArgumentParser

@main
struct PGHerald: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "pgherald",
        abstract: "Realtime change notifications for PostgreSQL.",
        discussion: """
            Triggers publish every row change with pg_notify; `pgherald serve` LISTENs, \
            counts each change and fans it out to subscribers.

            Connection strings are handed to libpq: key=value conninfo, postgresql:// URIs, \
            PG* environment variables, .pgpass and service files all work.
            """,
        version: "0.1.0",
        subcommands: [Serve.self, CheckConfig.self, Install.self, Uninstall.self, Tail.self, Status.self, Webhooks.self, Demo.self]
    )
}

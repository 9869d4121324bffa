public import ArgumentParser
public import HeraldPostgres

struct DatabaseOptions: ParsableArguments {
    @Option(
        name: .long,
        help: ArgumentHelp(
            "libpq connection string or postgresql:// URI.",
            discussion: "Empty (the default) uses libpq's defaults: PGHOST, PGPORT, PGDATABASE, PGUSER, .pgpass.",
            valueName: "conninfo"
        )
    )
    var db = ""

    func connectionString() throws -> ConnectionString {
        try ConnectionString(db)
    }
}

extension Durability: ExpressibleByArgument {}

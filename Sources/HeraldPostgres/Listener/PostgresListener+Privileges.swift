extension PostgresListener {
    /// Runs `body`, turning a refusal for want of privileges (SQLSTATE 42501,
    /// such as "permission denied for schema pgherald") into one that names
    /// the role and says what to do: serve reads and writes the pgherald
    /// schema that `pgherald install` made.
    func namingTheRole<Result>(of connection: LibpqConnection, _ body: () throws(LibpqError) -> Result) throws(LibpqError) -> Result {
        do {
            return try body()
        } catch where error.sqlState == "42501" {
            var explained = error
            // The words check-config --connect uses, which name the schema's owner and what it lacks.
            explained.message = (try? Installer.daemonRoleProblem(on: connection)).flatMap { $0 }
                ?? "database role \(connection.user) lacks a privilege serve needs (\(error.message)); "
                + "run pgherald install --daemon-role \(connection.user) as the owner of the pgherald schema, or run serve as that owner"
            throw explained
        }
    }
}

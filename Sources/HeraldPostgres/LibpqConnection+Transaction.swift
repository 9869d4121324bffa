extension LibpqConnection {
    /// Runs `body` between BEGIN and COMMIT, rolling back when it throws, so
    /// the connection is never left in a failed transaction.
    @discardableResult
    public func inTransaction<Value>(_ body: () throws(LibpqError) -> Value) throws(LibpqError) -> Value {
        try execute("BEGIN")
        do {
            let value = try body()
            try execute("COMMIT")
            return value
        } catch {
            _ = try? execute("ROLLBACK")
            throw error
        }
    }
}

import HeraldPostgres

/// The first line of the error `body` fails with, or nil when it succeeds:
/// what PostgreSQL told a role it refused.
func refusal(_ body: () throws(LibpqError) -> Void) -> String? {
    do {
        try body()
        return nil
    } catch {
        return error.message.components(separatedBy: "\n")[0]
    }
}

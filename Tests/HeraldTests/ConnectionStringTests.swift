import Testing
@testable import HeraldPostgres

@Suite struct ConnectionStringTests {
    @Test(arguments: [
        "host=db.example port=6543 dbname=app user=herald password=s3cret-pw",
        "postgresql://herald:s3cret-pw@db.example:6543/app",
    ])
    func summaryNamesTheServerButNotThePassword(text: String) throws {
        let connection = try ConnectionString(text)
        #expect(connection.description.contains("host=db.example"))
        #expect(connection.description.contains("port=6543"))
        #expect(connection.description.contains("dbname=app"))
        #expect(!connection.description.contains("s3cret-pw"))
        #expect(connection.redact("FATAL: bad s3cret-pw here") == "FATAL: bad *** here")
    }

    @Test(arguments: [
        "host=x password=s3cret pw",
        "host=x password='s3cret",
        "postgresql://u:s3cret@h/db?s3cret=1",
        "nonsense s3cret",
    ])
    func invalidStringsFailWithoutEchoingSecrets(text: String) {
        #expect {
            try ConnectionString(text)
        } throws: { error in
            guard let error = error as? LibpqError else { return false }
            return error.code == .invalidConnectionString && !error.message.contains("s3cret") && !error.message.contains("\n")
        }
    }

    @Test func anUnknownOptionIsNamedSoTheTypoCanBeFound() {
        #expect(throws: LibpqError(.invalidConnectionString, #"invalid connection string: invalid connection option "hots""#)) {
            try ConnectionString("hots=db password=s3cret")
        }
    }

    @Test func aPasswordInTheTextIsNoticed() throws {
        #expect(try ConnectionString("host=x password=s3cret").containsPassword)
        #expect(try ConnectionString("postgresql://u:s3cret@h/db").containsPassword)
        #expect(try !ConnectionString("host=x user=u").containsPassword)
    }

    @Test func emptyMeansLibpqDefaults() throws {
        _ = try ConnectionString("")
    }

    @Test func libpqMessagesBecomeOneLine() {
        #expect(LibpqError.oneLine("connection failed: refused\n\tIs the server running?\n") == "connection failed: refused; Is the server running?")
    }
}

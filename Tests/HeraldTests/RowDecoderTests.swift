import Foundation
import Herald
import Testing

/// Rows decoded into an app's own types, from JSON as PostgreSQL writes it.
@Suite struct RowDecoderTests {
    @Test(arguments: [
        ("2026-11-26", 1_795_651_200.0),
        ("2026-11-26T10:00:00", 1_795_687_200.0),
        ("2026-11-26T10:00:00.5", 1_795_687_200.5),
        ("2026-11-26T10:00:00.123456+00:00", 1_795_687_200.123456),
        ("2026-11-26T15:30:00.123456+05:30", 1_795_687_200.123456),
        ("2026-11-26T02:00:00-08:00", 1_795_687_200.0),
        ("2026-11-26T10:00:00Z", 1_795_687_200.0),
        ("1969-12-31T23:59:59", -1.0),
        ("2000-02-29T00:00:00+00:00:30", 951_782_370.0),
    ])
    func timestampsReadAsPostgreSQLWritesThem(_ text: String, _ seconds: Double) throws {
        let date = try #require(PostgresTimestamp.parse(text), "\(text)")
        #expect(abs(date.timeIntervalSince1970 - seconds) < 0.000_001, "\(text): \(date.timeIntervalSince1970)")
    }

    @Test func infinitiesAndNonsense() {
        #expect(PostgresTimestamp.parse("infinity") == .distantFuture)
        #expect(PostgresTimestamp.parse("-infinity") == .distantPast)
        for text in ["", "2026-13-01", "2026-11-26T25:00:00", "2026-11-26T10:00:00+", "2026-11-26 nonsense", "yesterday"] {
            #expect(PostgresTimestamp.parse(text) == nil, "\(text)")
        }
    }

    struct Enrolment: Decodable, Equatable {
        struct Details: Decodable, Equatable {
            var room: String
            var tags: [String]
        }

        var id: Int64
        var courseCode: String
        var fee: Decimal
        var student: UUID
        var enrolledAt: Date
        var startsOn: Date
        var details: Details
        var note: String?
    }

    @Test func aRowDecodesIntoTheAppsOwnType() throws {
        let row = #"{"id":9223372036854775807,"course_code":"ICS4U","fee":12345678901234567890.123456789,"student":"1b4e28ba-2fa1-11d2-883f-0016d3cca427","enrolled_at":"2026-11-26T10:00:00.123456+00:00","starts_on":"2027-01-04","details":{"room":"B12","tags":["lab"]},"note":null}"#
        let event = try Event(payload: #"{"id":"1","op":"UPDATE","schema":"public","table":"enrols_in","pk":{"id":1},"new":\#(row),"old":\#(row),"txid":"5","at":"2026-11-26T10:00:00.123456Z"}"#)
        let enrolment = try #require(try event.new(as: Enrolment.self))
        #expect(enrolment.id == .max)
        #expect(enrolment.fee == Decimal(string: "12345678901234567890.123456789"), "numeric without loss: \(enrolment.fee)")
        #expect(enrolment.student == UUID(uuidString: "1B4E28BA-2FA1-11D2-883F-0016D3CCA427"))
        #expect(abs(enrolment.enrolledAt.timeIntervalSince1970 - 1_795_687_200.123456) < 0.000_001)
        #expect(enrolment.details == .init(room: "B12", tags: ["lab"]) && enrolment.note == nil && enrolment.courseCode == "ICS4U")
        #expect(try event.old(as: Enrolment.self) == enrolment)
        let deleted = try Event(payload: #"{"id":"2","op":"DELETE","schema":"public","table":"enrols_in","pk":{"id":1},"new":null,"old":\#(row),"txid":"6","at":"2026-11-26T10:00:00.123456Z"}"#)
        #expect(try deleted.new(as: Enrolment.self) == nil)
        #expect(throws: DecodingError.self) {
            _ = try Event(payload: #"{"id":"3","op":"INSERT","schema":"public","table":"t","pk":null,"new":{"id":1,"course_code":"X","fee":1,"student":"1b4e28ba-2fa1-11d2-883f-0016d3cca427","enrolled_at":"soon","starts_on":"2027-01-04","details":{"room":"B","tags":[]}},"old":null,"txid":"7","at":"2026-11-26T10:00:00.123456Z"}"#).new(as: Enrolment.self)
        }
    }
}

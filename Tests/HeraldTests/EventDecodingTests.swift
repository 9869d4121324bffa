import Testing
@testable import Herald

@Suite struct EventDecodingTests {
    /// Exactly what `json_build_object` in sql/install.sql produces.
    static let triggerPayload = #"{"id" : "1", "op" : "UPDATE", "schema" : "public", "table" : "enrols_in", "pk" : { "student_id" : 1, "course_id" : 5 }, "new" : {"student_id":1,"course_id":5}, "old" : {"student_id":1,"course_id":4}, "txid" : "753", "at" : "2026-11-21T13:09:41.415345Z"}"#

    @Test func decodesTheTriggerPayload() throws {
        let event = try Event(payload: Self.triggerPayload)
        #expect(event.id == "1")
        #expect(event.operation == .update)
        #expect(event.table == TableName(schema: "public", name: "enrols_in"))
        #expect(event.primaryKey == ["student_id": .number(JSONNumber(1)), "course_id": .number(JSONNumber(5))])
        #expect(event.old?["course_id"] == .number(JSONNumber(4)))
        #expect(event.transactionID == "753")
        #expect(event.count == 0)
        #expect(!event.rowDataOmitted)
    }

    @Test func encodesTheSharedShape() throws {
        let event = try Event(payload: Self.triggerPayload).stamped(count: 17)
        #expect(event.jsonText == #"{"id":"1","count":17,"op":"UPDATE","schema":"public","table":"enrols_in","pk":{"student_id":1,"course_id":5},"new":{"student_id":1,"course_id":5},"old":{"student_id":1,"course_id":4},"txid":"753","at":"2026-11-21T13:09:41.415345Z"}"#)
    }

    @Test func aStampedEventKeepsItsRowsInsideItsJSON() throws {
        let decoded = try Event(payload: Self.triggerPayload)
        let event = decoded.stamped(count: 17)
        #expect(event.primaryKeyJSON == decoded.primaryKeyJSON && event.newJSON == decoded.newJSON && event.oldJSON == decoded.oldJSON)
        let json = try #require(event.encodedJSON)
        json.withUnsafeBufferPointer { json in
            for row in [event.primaryKeyJSON, event.newJSON, event.oldJSON] {
                row?.bytes.withUnsafeBufferPointer { row in
                    #expect(row.baseAddress! >= json.baseAddress! && row.baseAddress! + row.count <= json.baseAddress! + json.count)
                }
            }
        }
        #expect(event.retainedBytes == Event.retainedOverhead + json.capacity + 32)
    }

    @Test func decodesTheOversizeMarker() throws {
        let event = try Event(payload: #"{"id":"5","op":"INSERT","schema":"public","table":"later","pk":{"id":1},"new":null,"old":null,"txid":"756","at":"2026-11-21T13:09:41.426244Z","omitted":true}"#)
        #expect(event.rowDataOmitted)
        #expect(event.new == nil && event.old == nil)
        #expect(event.primaryKey == ["id": .number(JSONNumber(1))])
        #expect(event.jsonText.hasSuffix(#""omitted":true}"#))
    }

    @Test func decodesTruncate() throws {
        let event = try Event(payload: #"{"id":"7","op":"TRUNCATE","schema":"s","table":"t","pk":null,"new":null,"old":null,"txid":"9","at":"x"}"#)
        #expect(event.operation == .truncate)
        #expect(event.primaryKey == nil)
    }

    @Test(arguments: [
        ("not json", EventDecodingError.Code.invalidJSON),
        ("[1,2]", .notAnObject),
        ("\"text\"", .notAnObject),
        (#"{"op":"INSERT"}"#, .missingField),
        (#"{"id":"1","op":"UPSERT","schema":"s","table":"t","txid":"1","at":"x","new":{}}"#, .unknownOperation),
        (#"{"id":1,"op":"INSERT","schema":"s","table":"t","txid":"1","at":"x","new":{}}"#, .wrongType),
        (#"{"id":"","op":"INSERT","schema":"s","table":"t","txid":"1","at":"x","new":{}}"#, .wrongType),
        (#"{"id":"1","op":"INSERT","schema":"s","table":"t","txid":"1","at":"x","new":[1]}"#, .wrongType),
        (#"{"id":"1","op":"INSERT","schema":"s","table":"t","txid":"1","at":"x","new":{},"pk":5}"#, .wrongType),
        (#"{"id":"1","op":"INSERT","schema":"s","table":"t","txid":"1","at":"x","new":{"a":}}"#, .invalidJSON),
        (#"{"id":"1","op":"INSERT","schema":"s","table":"t","txid":"1","at":"x","new":nul}"#, .invalidJSON),
        (#"{"id":"1","op":"INSERT","schema":"s","table":"t","txid":"1","at":"x","new":{},"omitted":"yes"}"#, .wrongType),
        (#"{"id":"1","op":"INSERT","schema":"s","table":"t","txid":"1","at":"x"}"#, .inconsistentRows),
        (#"{"id":"1","op":"DELETE","schema":"s","table":"t","txid":"1","at":"x","new":{}}"#, .inconsistentRows),
        (#"{"id":"1","op":"UPDATE","schema":"s","table":"t","txid":"1","at":"x","new":{}}"#, .inconsistentRows),
    ])
    func rejectsWrongShapes(payload: String, code: EventDecodingError.Code) {
        #expect {
            try Event(payload: payload)
        } throws: { error in
            (error as? EventDecodingError)?.code == code
        }
    }

    @Test func ignoresUnknownMembers() throws {
        let event = try Event(payload: #"{"id":"1","op":"DELETE","schema":"s","table":"t","txid":"1","at":"x","old":{"a":1},"future":[1,2]}"#)
        #expect(event.old == ["a": .number(JSONNumber(1))])
    }
}

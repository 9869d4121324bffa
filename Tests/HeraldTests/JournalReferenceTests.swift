import Herald
import Testing

@Suite struct JournalReferenceTests {
    func decode(_ text: String) -> JournalReference? {
        var text = text
        return text.withUTF8 { JournalReference(payload: $0) }
    }

    @Test func readsTheTriggersReference() {
        #expect(decode(#"{"ref" : "42", "txid" : "7791"}"#) == JournalReference(id: 42, transactionID: 7791))
    }

    @Test func readsAStatementsRange() {
        let reference = decode(#"{"ref":"42","through":"141","txid":"7791"}"#)
        #expect(reference == JournalReference(id: 42, lastID: 141, transactionID: 7791))
        #expect(decode(#"{"ref":"42","txid":"7791"}"#)?.lastID == 42)
    }

    @Test(arguments: [
        #"{"ref":"42"}"#, #"{"ref":42,"txid":"1"}"#, #"{"ref":"x","txid":"1"}"#,
        #"{"ref":"1","txid":"1","extra":"1"}"#, #"{"id":"1","txid":"1"}"#, "[]", "not json",
        #"{"ref":"5","through":"4","txid":"1"}"#, #"{"ref":"5","through":"x","txid":"1"}"#,
    ])
    func rejectsAnythingElse(_ text: String) {
        #expect(decode(text) == nil)
    }
}

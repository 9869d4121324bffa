import Herald
@testable import HeraldService
import Testing

@Suite struct PrettyEventFormatterTests {
    let formatter = PrettyEventFormatter(colour: false)

    /// The event's id, which `tail --since` takes, not the change count, which starts again at a restart.
    @Test func updateShowsOnlyChangedColumns() throws {
        let event = try Event(payload: #"{"id":"2","op":"UPDATE","schema":"public","table":"course","pk":{"id":11},"new":{"id":11,"name":"Theatre","code":"A"},"old":{"id":11,"name":"Drama","code":"A"},"txid":"9","at":"2026-11-21T12:00:01.004000Z"}"#)
        #expect(formatter.line(for: event) == "12:00:01.004 #2 UPDATE public.course id=11  name: Drama → Theatre")
    }

    @Test func insertDeleteTruncateAndOmitted() throws {
        let insert = try Event(payload: #"{"id":"1","op":"INSERT","schema":"public","table":"course","pk":{"id":11},"new":{"id":11,"name":"Drama"},"txid":"9","at":"2026-11-21T12:00:00.123456Z"}"#)
        #expect(formatter.line(for: insert) == "12:00:00.123 #1 INSERT public.course id=11  id=11 name=Drama")
        let delete = try Event(payload: #"{"id":"3","op":"DELETE","schema":"public","table":"course","pk":{"id":11},"old":{"id":11},"txid":"9","at":"2026-11-21T12:00:00.123456Z"}"#)
        #expect(formatter.line(for: delete) == "12:00:00.123 #3 DELETE public.course id=11")
        let truncate = try Event(payload: #"{"id":"4","op":"TRUNCATE","schema":"s","table":"t","txid":"9","at":"2026-11-21T12:00:00.123456Z"}"#)
        #expect(formatter.line(for: truncate) == "12:00:00.123 #4 TRUNCATE s.t")
        let omitted = try Event(payload: #"{"id":"5","op":"UPDATE","schema":"s","table":"t","pk":{"id":1},"txid":"9","at":"2026-11-21T12:00:00.123456Z","omitted":true}"#)
        #expect(formatter.line(for: omitted) == "12:00:00.123 #5 UPDATE s.t id=1  (row too large to notify; data omitted)")
    }

    @Test func colourOnlyWhenAsked() throws {
        let event = try Event(payload: #"{"id":"4","op":"TRUNCATE","schema":"s","table":"t","txid":"9","at":"2026-11-21T12:00:00.123456Z"}"#)
        #expect(PrettyEventFormatter(colour: true).line(for: event).contains("\u{1B}["))
        #expect(!formatter.line(for: event).contains("\u{1B}["))
    }

    /// A row value written by an app's user reaches an operator's terminal through `tail` and stdout: no line break or escape of it gets there.
    @Test func rowTextCannotCommandTheTerminal() throws {
        let event = try Event(payload: #"{"id":"6","op":"INSERT","schema":"public","table":"note","pk":{"id":1},"new":{"id":1,"body":"hi\r\n12:00:00.000 #7 DELETE public.course id=1\u001b[2J","k\u001b]0;x\u0007":"v"},"txid":"9","at":"2026-11-21T12:00:00.123456Z"}"#)
        let line = formatter.line(for: event)
        #expect(!line.unicodeScalars.contains(where: TerminalText.isControl), "\(line)")
        #expect(line.contains(#"body=hi\r\n12:00:00.000 #7 DELETE public.course id=1\u{1b}[2J"#), "\(line)")
    }
}

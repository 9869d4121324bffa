@testable import HeraldNATS
import PropertyBased
import Testing

/// The NATS frame parser and encoder, on bytes alone.
@Suite struct NATSFrameTests {
    func operations(_ text: String, splitAt cuts: [Int] = []) throws -> [NATSServerOperation] {
        let bytes = Array(text.utf8)
        var parser = NATSFrameParser()
        var found: [NATSServerOperation] = []
        var from = 0
        for cut in (cuts.filter { $0 > 0 && $0 < bytes.count }.sorted() + [bytes.count]) where cut >= from {
            parser.append(bytes[from..<cut])
            from = cut
            while let operation = try parser.next() { found.append(operation) }
        }
        return found
    }

    static let info = #"INFO {"server_id":"NABC","version":"2.9.10","headers":true,"max_payload":1048576,"jetstream":true}"# + "\r\n"

    @Test func readsEveryServerOperation() throws {
        let text = Self.info + "PING\r\nPONG\r\n+OK\r\n-ERR 'Authorization Violation'\r\n"
            + "MSG orders.paid 7 5\r\nhello\r\n"
            + "MSG _INBOX.a.1 9 reply.to 0\r\n\r\n"
            + "HMSG _INBOX.a.2 9 31 33\r\nNATS/1.0\r\nNats-Msg-Id: 1042\r\n\r\nok\r\n"
            + "HMSG _INBOX.a.3 9 30 30\r\nNATS/1.0 503 No Responders\r\n\r\n\r\n"
        let found = try operations(text)
        guard case .info(let info) = found.first else {
            Issue.record("no INFO first: \(found)")
            return
        }
        #expect(info.serverID == "NABC" && info.headers && info.jetStream && info.maximumPayload == 1 << 20)
        #expect(Array(found.dropFirst()) == [
            .ping, .pong, .ok, .error("Authorization Violation"),
            .message(NATSMessage(subject: "orders.paid", subscriptionID: "7", payload: Array("hello".utf8))),
            .message(NATSMessage(subject: "_INBOX.a.1", subscriptionID: "9", replyTo: "reply.to", payload: [])),
            .message(NATSMessage(subject: "_INBOX.a.2", subscriptionID: "9", headers: [("Nats-Msg-Id", "1042")], payload: Array("ok".utf8))),
            .message(NATSMessage(subject: "_INBOX.a.3", subscriptionID: "9", status: 503, payload: [])),
        ])
    }

    @Test func readsHeaderLinesByteByByte() throws {
        func parse(_ text: String) throws -> (status: Int?, headers: [(name: String, value: String)]) {
            try NATSFrameParser.headers(ArraySlice(Array(text.utf8)))
        }
        let idle = try parse("NATS/1.0 100 Idle Heartbeat\r\nNats-Last-Consumer: 7\r\n\r\n")
        #expect(idle.status == 100)
        #expect(idle.headers.map(\.name) == ["Nats-Last-Consumer"] && idle.headers.map(\.value) == ["7"])
        let plain = try parse("NATS/1.0\r\nPgherald-Ends-Transaction:\ttrue \r\nUrl: http://x:1/a \r\nEmpty:\r\n\r\n")
        #expect(plain.status == nil)
        #expect(plain.headers.map(\.name) == ["Pgherald-Ends-Transaction", "Url", "Empty"])
        #expect(plain.headers.map(\.value) == ["true", "http://x:1/a", ""], "blanks trimmed, a colon in the value kept")
        #expect(try parse("NATS/1.0 503").status == 503, "no line end at all")
        #expect(try parse("NATS/1.0\r\nÄ-Name: ÿ\r\n").headers.first?.value == "ÿ")
        #expect(throws: NATSProtocolError.self) { try parse("NATS/1.0\r\nno colon here\r\n\r\n") }
        #expect(throws: NATSProtocolError.self) { try parse("HTTP/1.1 200\r\n\r\n") }
    }

    @Test func waitsForWholeOperations() throws {
        var parser = NATSFrameParser()
        parser.append(Array("MSG a 1 10\r\n01234".utf8))
        #expect(try parser.next() == nil)
        parser.append(Array("56789\r".utf8))
        #expect(try parser.next() == nil)
        parser.append(Array("\nPI".utf8))
        #expect(try parser.next() == .message(NATSMessage(subject: "a", subscriptionID: "1", payload: Array("0123456789".utf8))))
        #expect(try parser.next() == nil)
        parser.append(Array("NG\r\n".utf8))
        #expect(try parser.next() == .ping)
    }

    @Test func refusesWhatTheProtocolDoesNotAllow() {
        for bad in ["BOGUS\r\n", "MSG a 1\r\n", "MSG a 1 3\r\nabcX\r\n", "HMSG a 1 40 30\r\n", "INFO {not json}\r\n", "HMSG a 1 4 4\r\nHTTP\r\n"] {
            #expect(throws: NATSProtocolError.self, "\(bad)") { try operations(bad) }
        }
        var parser = NATSFrameParser(maximumPayload: 8)
        parser.append(Array("MSG a 1 9\r\n".utf8))
        #expect(throws: NATSProtocolError.self) { try parser.next() }
        var endless = NATSFrameParser()
        endless.append(Array(repeating: UInt8(ascii: "x"), count: NATSFrameParser.maximumControlLine + 1))
        #expect(throws: NATSProtocolError.self) { try endless.next() }
    }

    @Test func encodesClientOperations() throws {
        var bytes: [UInt8] = []
        NATSClientOperation.publish(subject: "pgherald.public.course.INSERT", replyTo: "_INBOX.x.1", headers: [], payload: Array("{}".utf8)).encode(into: &bytes)
        NATSClientOperation.publish(subject: "s", replyTo: nil, headers: [("Nats-Msg-Id", "7")], payload: Array("ab".utf8)).encode(into: &bytes)
        NATSClientOperation.subscribe(subject: "_INBOX.x.*", subscriptionID: "1").encode(into: &bytes)
        NATSClientOperation.ping.encode(into: &bytes)
        #expect(String(decoding: bytes, as: UTF8.self) == "PUB pgherald.public.course.INSERT _INBOX.x.1 2\r\n{}\r\n"
            + "HPUB s 28 30\r\nNATS/1.0\r\nNats-Msg-Id: 7\r\n\r\nab\r\n"
            + "SUB _INBOX.x.* 1\r\nPING\r\n")
        var connect: [UInt8] = []
        NATSClientOperation.connect(try NATSConnectOptions(name: "pgherald", version: "1", authentication: .password(user: "u", password: "p")).answering(nonce: nil)).encode(into: &connect)
        let line = String(decoding: connect, as: UTF8.self)
        #expect(line.hasPrefix("CONNECT {") && line.hasSuffix("}\r\n"))
        #expect(line.contains(#""pass":"p""#) && line.contains(#""headers":true"#) && line.contains(#""echo":false"#) && !line.contains("auth_token"))
    }

    /// What the client sends for a message, read back by the parser as the
    /// server would deliver it, split anywhere, is the same message.
    @Test func anyMessageSurvivesAnySplit() async {
        let byte = Gen.int(in: 0...255).map { UInt8($0) }
        let token = Gen.int(in: 0...25).map { String(UnicodeScalar(UInt8(ascii: "a") + UInt8($0))) }.array(of: 1...8).map { $0.joined() }
        await propertyCheck(
            count: PropertyTests.cases(300),
            input: byte.array(of: 0...300), zip(token, token).array(of: 0...3), Gen.int(in: 0...400).array(of: 0...6)
        ) { payload, headers, cuts in
            var published: [UInt8] = []
            NATSClientOperation.publish(subject: "sub.ject", replyTo: nil, headers: headers.map { ($0.0, $0.1) }, payload: payload).encode(into: &published)
            // The server delivers what was published with MSG/HMSG and a subscription id in place of PUB/HPUB.
            let lineEnd = published.firstIndex(of: UInt8(ascii: "\r")) ?? 0
            let line = String(decoding: published[..<lineEnd], as: UTF8.self)
            let delivered = line.hasPrefix("HPUB") ? "HMSG sub.ject 1" + line.dropFirst("HPUB sub.ject".count) : "MSG sub.ject 1" + line.dropFirst("PUB sub.ject".count)
            let bytes = Array(delivered.utf8) + published[lineEnd...]
            var parser = NATSFrameParser()
            var from = 0
            var messages: [NATSServerOperation] = []
            for cut in (cuts.filter { $0 < bytes.count }.sorted() + [bytes.count]) where cut >= from {
                parser.append(bytes[from..<cut])
                from = cut
                while let operation = try? parser.next() { messages.append(operation) }
            }
            #expect(messages == [.message(NATSMessage(subject: "sub.ject", subscriptionID: "1", headers: headers.map { ($0.0, $0.1) }, payload: payload))])
        }
    }
}

/// Where a stream message is, read from its `$JS.ACK` reply subject in both forms.
struct AcknowledgementSubjectTests {
    @Test func bothFormsOfTheReplySubjectGiveThePosition() throws {
        let old = try #require(AcknowledgementSubject("$JS.ACK.PGHERALD.abc123.1.42.7.1732770000000000000.5"))
        #expect([old.streamSequence, old.consumerSequence, old.pending] == [42, 7, 5])
        let new = try #require(AcknowledgementSubject("$JS.ACK.hub.ACCOUNTHASH.PGHERALD.abc123.2.43.8.1732770000000000000.0.xyz"))
        #expect([new.streamSequence, new.consumerSequence, new.pending] == [43, 8, 0])
        #expect(AcknowledgementSubject("_INBOX.1.2") == nil)
        #expect(AcknowledgementSubject("$JS.ACK.PGHERALD.c.1.x.7.0.5") == nil)
        #expect(AcknowledgementSubject("$JS.ACK.PGHERALD.c.1.0.7.0.5") == nil, "sequences start at 1")
        #expect(AcknowledgementSubject("$JS.ACK.PGHERALD.c.1.18446744073709551616.7.0.5") == nil, "past UInt64")
        #expect(AcknowledgementSubject("$JS.ACK.PGHERALD.c.1.+42.7.0.5") == nil)
        #expect(AcknowledgementSubject("$JS.NAK.PGHERALD.abc123.1.42.7.1732770000000000000.5") == nil)
        #expect(AcknowledgementSubject("$JS.ACK.PGHERALD.abc123.1.42.7.1732770000000000000.") == nil, "no pending")
    }
}

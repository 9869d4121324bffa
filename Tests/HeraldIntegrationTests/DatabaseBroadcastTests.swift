import Foundation
import Herald
import HeraldPostgres
import Testing

extension IntegrationTests {
    /// `pgherald.send`: a message published with its transaction, through the
    /// journal and NOTIFY as row events are. On every major, with both kinds
    /// of trigger and both durabilities, sent by an application role granted it.
    @Suite
    struct DatabaseBroadcastTests {
        static let everything = EventFilter(operations: OperationSet.all.union(.broadcast))

        @Test(arguments: TriggerCell.all)
        func aMessageArrivesOnCommitInOrderWithItsRowsAndNeverOnRollback(_ cell: TriggerCell) async throws {
            let database = try TestDatabase.create(install: false, on: cell.cluster)
            try Installer.install(on: database.connect(), durability: cell.durability, triggers: cell.triggers)
            let daemon = try await RunningListener(database: database, filter: Self.everything)
            let sender = "sender_\(UInt32.random(in: 0...UInt32.max))"
            let outsider = "outsider_\(UInt32.random(in: 0...UInt32.max))"
            try database.execute("""
                CREATE ROLE \(sender) LOGIN; CREATE ROLE \(outsider) LOGIN;
                GRANT INSERT ON course TO \(sender); GRANT USAGE ON ALL SEQUENCES IN SCHEMA public TO \(sender);
                GRANT USAGE ON SCHEMA pgherald TO \(sender), \(outsider);
                GRANT EXECUTE ON FUNCTION pgherald.send(jsonb, text, text, boolean) TO \(sender)
                """)
            let application = try LibpqConnection.connect(ConnectionString("\(database.connInfo) user=\(sender)"))

            try application.execute("BEGIN")
            try application.execute("INSERT INTO course (short_code, name) VALUES ('B1', 'Before')")
            try application.execute(#"SELECT pgherald.send('{"text": "hello"}', 'message', 'room-1', false)"#)
            try application.execute("INSERT INTO course (short_code, name) VALUES ('B2', 'After')")
            try application.execute("COMMIT")
            try application.execute("BEGIN")
            try application.execute("SELECT pgherald.send('{}', 'never', 'room-1', false)")
            try application.execute("ROLLBACK")
            try application.execute(#"SELECT pgherald.send('{"n": 2}', 'note', 'room-2')"#)

            let events = try await daemon.inbox.take(4, within: 10)
            #expect(events.map(\.operation) == [.insert, .broadcast, .insert, .broadcast], "in commit order, with the transaction's rows")
            let message = try #require(events.count == 4 ? events[1] : nil)
            #expect(message.table == TableName(schema: "realtime", name: "room-1"))
            #expect(message.new?["event"] == .string("message") && message.new?["private"] == .bool(false))
            #expect(message.new?["payload"]?["text"] == .string("hello"))
            #expect(message.transactionID == events[0].transactionID)
            #expect(events[3].new?["private"] == .bool(true), "private unless said otherwise, as Supabase's realtime.send")
            try await Task.sleep(for: .milliseconds(300))
            #expect(daemon.inbox.count == 0, "a rolled-back message never arrives")

            // Larger than a notification: durable sends a reference to the journal; notify-only refuses it.
            let large = String(repeating: "x", count: 9000)
            let sendLarge = "SELECT pgherald.send(json_build_object('blob', $1::text)::jsonb, 'large', 'room-1', false)"
            if cell.durability == .durable {
                try application.execute(sendLarge, parameters: [large])
                let arrived = try await daemon.inbox.take(1, within: 10)
                #expect(arrived.first?.new?["payload"]?["blob"]?.stringValue == large)
            } else {
                #expect(refusal { () throws(LibpqError) in try application.execute(sendLarge, parameters: [large]) }?.contains("does not fit in a notification") == true)
            }
            #expect(refusal { () throws(LibpqError) in try application.execute("SELECT pgherald.send('{}', '', 'room-1')") }?.contains("needs a topic and an event") == true)
            let stranger = try LibpqConnection.connect(ConnectionString("\(database.connInfo) user=\(outsider)"))
            #expect(refusal { () throws(LibpqError) in try stranger.execute("SELECT pgherald.send('{}', 'e', 'room-1')") }?.contains("permission denied") == true)
            try await daemon.stop()
        }

        /// The socket's `/events?topic=` and the in-process `EventFilter.topics`
        /// carry messages for their topics only; `/events` without it carries rows only.
        @Test func theSocketAndTheBrokerSubscribeToTopics() async throws {
            let database = try TestDatabase.create()
            let daemon = try await SocketDaemon(database: database)
            let topics = try await RawStream(socketPath: daemon.socketPath, path: "/events?format=ndjson&topic=room-1,room-2")
            let rows = try await RawStream(socketPath: daemon.socketPath, path: "/events?format=ndjson")
            try await daemon.waitForSubscribers(2, kind: "ndjson")
            try database.execute(#"""
                BEGIN;
                INSERT INTO course (short_code, name) VALUES ('T1', 'Row');
                SELECT pgherald.send('{"a": 1}', 'first', 'room-1', false);
                SELECT pgherald.send('{"a": 2}', 'second', 'room-3', false);
                SELECT pgherald.send('{"a": 3}', 'third', 'room-2', true);
                COMMIT
                """#)
            try await topics.waitForLines(2)
            try await rows.waitForLines(1)
            try await Task.sleep(for: .milliseconds(300))
            let messages = try topics.lines.map { try Event(payload: String($0)) }
            #expect(messages.map { $0.new?["event"]?.stringValue } == ["first", "third"], "its topics only, private ones too for a peer that sees everything")
            #expect(messages.allSatisfy { $0.operation == .broadcast })
            let changes = try rows.lines.map { try Event(payload: String($0)) }
            #expect(changes.map(\.operation) == [.insert], "rows only without topic=")
            let refused = try await daemon.get("/events?topic=room-1&table=public.course")
            #expect(refused.status == 400 && refused.body.contains("use one or the other"), "\(refused.body)")
            _ = try await daemon.stop()

            let broker = Broker()
            let subscription = broker.subscribe(.topics(["room-1"]))
            let published = try Event(payload: #"{"id":"1","op":"BROADCAST","schema":"realtime","table":"room-1","pk":null,"new":{"event":"e","payload":{},"private":false},"old":null,"txid":"9","at":"2026-01-01T00:00:00.000000Z"}"#)
            broker.publish([published, try Event(payload: #"{"id":"2","op":"INSERT","schema":"public","table":"course","pk":null,"new":{"id":1},"old":null,"txid":"9","at":"2026-01-01T00:00:00.000000Z"}"#)])
            let received = try await subscription.nextBatch(limit: 10)
            #expect(received.map(\.id) == ["1"])
        }
    }
}

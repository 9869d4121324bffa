import Foundation
import Herald
import HeraldPostgres
import Logging
import Testing

extension IntegrationTests {
    /// What an edge whose `database` is a read replica decides: the replica
    /// takes no insert, so private channels are judged there by the
    /// policies' expressions rather than by Supabase's rolled-back insert.
    @Suite
    struct ReadReplicaTests {
        /// Every identity and topic gets the same answer from a streaming
        /// standby as from its primary, over policies of every shape that
        /// applies: permissive and restrictive, SELECT, INSERT and ALL (whose
        /// USING also checks inserts), claims read through a function.
        @Test func aReplicaAuthorizesPrivateChannelsAsItsPrimaryDoes() async throws {
            let failover = FailoverTests()
            let root = FileManager.default.temporaryDirectory.appending(path: "pgherald-replica-\(UUID().uuidString.prefix(8))").path
            try FileManager.default.createDirectory(atPath: root, withIntermediateDirectories: true)
            chmod(root, 0o755)
            try await failover.cluster("start '\(root)/primary' --fast")
            try await failover.cluster("standby '\(root)/primary' '\(root)/standby'")
            defer {
                _ = system("'\(TestDatabase.repositoryRoot.path)/scripts/pg-cluster' stop '\(root)/standby' >/dev/null 2>&1")
                _ = system("'\(TestDatabase.repositoryRoot.path)/scripts/pg-cluster' stop '\(root)/primary' >/dev/null 2>&1")
                try? FileManager.default.removeItem(atPath: root)
            }
            let (primary, standby) = (try failover.environment("\(root)/primary"), try failover.environment("\(root)/standby"))
            let admin = try LibpqConnection.connect(ConnectionString("host=\(primary.host) port=\(primary.port) user=postgres dbname=postgres"))
            try admin.execute("CREATE DATABASE replica")
            let conninfo = { (node: (host: String, port: String)) in "host=\(node.host) port=\(node.port) user=postgres dbname=replica" }
            let database = TestDatabase(name: "replica", connInfo: conninfo(primary))
            try Installer.install(on: database.connect())
            let role = RowSecurityTests.makeRole()
            try database.execute("CREATE ROLE \(role) NOLOGIN")
            try RowSecurityTests.createRealtimeMessages(database, role: role)
            try database.execute("""
                CREATE FUNCTION realtime.sub() RETURNS text LANGUAGE sql STABLE
                  AS $$ SELECT current_setting('request.jwt.claims', true)::json->>'sub' $$;
                GRANT EXECUTE ON FUNCTION realtime.sub() TO \(role);
                CREATE POLICY own_room ON realtime.messages FOR SELECT TO \(role)
                  USING (extension = 'broadcast' AND realtime.topic() IN ('room-' || realtime.sub(), 'room-all'));
                CREATE POLICY lobby_presence ON realtime.messages FOR SELECT TO \(role)
                  USING (extension = 'presence' AND realtime.topic() = 'room-all');
                CREATE POLICY live_sessions ON realtime.messages AS RESTRICTIVE FOR ALL TO \(role)
                  USING (coalesce(current_setting('request.jwt.claims', true)::json->>'session_id', '') <> 'revoked');
                CREATE POLICY post_own_room ON realtime.messages FOR INSERT TO \(role)
                  WITH CHECK (realtime.topic() = 'room-' || realtime.sub());
                CREATE POLICY ann_runs_the_lobby ON realtime.messages FOR ALL TO \(role)
                  USING (realtime.topic() = 'room-all' AND realtime.sub() = 'ann');
                CREATE POLICY no_presence_writes_by_ben ON realtime.messages AS RESTRICTIVE FOR INSERT TO \(role)
                  WITH CHECK (extension = 'broadcast' OR realtime.sub() <> 'ben');
                """)
            // The standby has replayed all of it before it is asked. The test
            // cluster commits asynchronously, so the last commit can still be
            // in WAL buffers past pg_current_wal_lsn(): wait for the insert position.
            let target = try #require(try admin.execute("SELECT pg_current_wal_insert_lsn()::text").rows.first?[0] ?? nil)
            let standbyAdmin = try LibpqConnection.connect(ConnectionString("host=\(standby.host) port=\(standby.port) user=postgres dbname=postgres"))
            try await waitFor(seconds: 30) {
                try standbyAdmin.execute("SELECT pg_last_wal_replay_lsn() >= $1::pg_lsn", parameters: [target]).rows.first?[0] == "t"
            } failure: { "the standby did not replay up to \(target)" }

            let logger = Logger(label: "replica-test")
            let onPrimary = RowSecurityGate(broker: Broker(), database: try ConnectionString(conninfo(primary)), logger: logger)
            let onStandby = RowSecurityGate(broker: Broker(), database: try ConnectionString(conninfo(standby)), logger: logger)
            var answers: [String: ChannelAuthorization] = [:]
            var differences: [String] = []
            for (sub, session) in [("ann", "a1"), ("ben", "b1"), ("cat", "c1"), ("ann", "revoked"), ("ben", "revoked")] {
                let identity = RowSecurityIdentity(role: role, claims: ["sub": .string(sub), "session_id": .string(session)])
                for topic in ["room-ann", "room-ben", "room-all", "elsewhere"] {
                    let expected = try #require(try await onPrimary.authorize(topic: topic, as: identity))
                    let replica = try #require(try await onStandby.authorize(topic: topic, as: identity))
                    answers["\(sub)/\(session) \(topic)"] = expected
                    if replica != expected { differences.append("\(sub)/\(session) on \(topic): primary \(expected), replica \(replica)") }
                }
            }
            #expect(differences.isEmpty, "\(differences.joined(separator: "\n"))")
            // The policies' shapes were all exercised: each permission both given and refused.
            for permission in [\ChannelAuthorization.readsBroadcast, \.readsPresence, \.writesBroadcast, \.writesPresence] {
                #expect(Set(answers.values.map { $0[keyPath: permission] }) == [true, false], "\(permission): \(answers)")
            }
            #expect(answers["ann/a1 room-all"] == ChannelAuthorization(readsBroadcast: true, readsPresence: true, writesBroadcast: true, writesPresence: true))
            #expect(answers["ben/b1 room-ben"] == ChannelAuthorization(readsBroadcast: true, writesBroadcast: true))
            #expect(answers["ann/revoked room-ann"] == ChannelAuthorization())
        }
    }
}

import Foundation
import Testing

extension IntegrationTests {
    /// `pgherald(8)` and `pgherald.yaml(5)` (docs/man, written by
    /// scripts/man-pages) name exactly the commands, options and keys that
    /// the built binary has: a new flag or key without its page fails here.
    @Suite
    struct ManualPageTests {
        static let repository = URL(fileURLWithPath: #filePath)
            .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()

        static func page(_ name: String) throws -> String {
            try String(contentsOf: repository.appending(path: "docs/man/\(name)"), encoding: .utf8)
        }

        /// Roff's escapes undone, for comparing names.
        static func plain(_ roff: some StringProtocol) -> String {
            String(roff).replacing("\\fB", with: "").replacing("\\fI", with: "").replacing("\\fR", with: "")
                .replacing("\\-", with: "-").replacing("\\e", with: "\\")
        }

        /// The long options of every command, as the binary describes itself to ArgumentParser's tools.
        static func optionsFromHelp() async throws -> [String: Set<String>] {
            let dump = try await DaemonProcess(["--experimental-dump-help"]).finish()
            #expect(dump.status == 0, "\(dump.stderr)")
            let root = try #require(try JSONSerialization.jsonObject(with: Data(dump.stdout.utf8)) as? [String: Any])
            var options: [String: Set<String>] = [:]
            func walk(_ command: [String: Any], _ path: [String]) {
                let arguments = command["arguments"] as? [[String: Any]] ?? []
                var names: Set<String> = []
                for argument in arguments where argument["shouldDisplay"] as? Bool != false {
                    let longs = (argument["names"] as? [[String: Any]] ?? []).filter { $0["kind"] as? String == "long" }
                    for long in longs { if let name = long["name"] as? String, name != "help", name != "version" { names.insert("--" + name) } }
                }
                if path.count > 1 { options[path.joined(separator: " ")] = names }
                for case let sub as [String: Any] in command["subcommands"] as? [Any] ?? [] {
                    guard let name = sub["commandName"] as? String, name != "help" else { continue }
                    walk(sub, path + [name])
                }
            }
            walk(try #require(root["command"] as? [String: Any]), ["pgherald"])
            return options
        }

        /// The options each `.SS "pgherald …"` section of pgherald(8) describes under `.TP`.
        static func optionsFromPage(_ text: String) -> [String: Set<String>] {
            var options: [String: Set<String>] = [:]
            var command: String?
            let lines = text.split(separator: "\n", omittingEmptySubsequences: false)
            for (index, line) in lines.enumerated() {
                if line.hasPrefix(".SS \"") {
                    command = plain(line.dropFirst(5).dropLast())
                    options[command!] = []
                } else if line.hasPrefix(".SH") {
                    command = nil
                } else if line == ".TP", let command, index + 1 < lines.count {
                    let label = plain(lines[index + 1])
                    for word in label.split(whereSeparator: { $0 == " " || $0 == "," }) where word.hasPrefix("--") {
                        options[command, default: []].insert(String(word))
                    }
                }
            }
            return options
        }

        @Test func pgherald8NamesEveryCommandAndOptionOfHelp() async throws {
            let fromHelp = try await Self.optionsFromHelp()
            let fromPage = Self.optionsFromPage(try Self.page("pgherald.8"))
            #expect(fromHelp["pgherald serve"]?.contains("--db") == true)
            for command in Set(fromHelp.keys).union(fromPage.keys).sorted() {
                #expect(fromPage[command] == fromHelp[command], "pgherald(8) and --help disagree on \(command): run scripts/man-pages")
            }
        }

        /// The keys that `.SH KEYS` of pgherald.yaml(5) lists.
        static func keysFromPage(_ text: String) -> Set<String> {
            let lines = text.split(separator: "\n", omittingEmptySubsequences: false)
            guard let start = lines.firstIndex(of: ".SH KEYS") else { return [] }
            let end = lines[(start + 1)...].firstIndex { $0.hasPrefix(".SH") } ?? lines.endIndex
            var keys: Set<String> = []
            for index in start..<end where lines[index] == ".TP" && index + 1 < end {
                keys.insert(plain(lines[index + 1]))
            }
            return keys
        }

        /// A key as the page writes it: names an operator chooses become NAME (or CATEGORY).
        static func pattern(_ key: String) -> String {
            var parts = key.split(separator: ".").map(String.init)
            switch parts.first {
            case "webhooks" where parts.count > 3 && parts[2] == "headers": return "webhooks.NAME.headers"
            case "access", "webhooks", "queries" where parts.count > 2: parts[1] = "NAME"
            case "log" where parts.count == 3 && parts[1] == "categories": parts[2] = "CATEGORY"
            case "realtime" where parts.count > 3 && parts[1] == "keys": parts[2] = "NAME"
            case "realtime" where parts.count > 3 && parts[1] == "jwt" && parts[2] == "roles": return "realtime.jwt.roles.NAME"
            default: break
            }
            return parts.joined(separator: ".")
        }

        @Test func pgheraldYaml5NamesEveryKeyServeReads() async throws {
            let directory = FileManager.default.temporaryDirectory.appending(path: "manual-\(UUID().uuidString.prefix(8))")
            try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
            defer { try? FileManager.default.removeItem(at: directory) }
            try "hunter2\n".write(to: directory.appending(path: "password"), atomically: true, encoding: .utf8)
            try "a-jwt-secret-of-enough-length-0123456789\n".write(to: directory.appending(path: "jwt"), atomically: true, encoding: .utf8)
            let certificates = try await TestCertificates()
            // Every section on, every optional key set, so that check-config prints every key serve reads.
            let file = directory.appending(path: "pgherald.yaml")
            try """
            database: "host=/tmp dbname=app"
            password_file: \(directory.path)/password
            listen_database: "host=/tmp dbname=app"
            durability: durable
            socket:
              path: \(directory.path)/pgherald.sock
              group: root
            access:
              clients:
                group: root
                schemas: [public]
                tables: [public.course]
                ops: [INSERT]
                where: id.gt.0
                topics: [room-*]
                queries: [enrolments_*]
                rls: true
                role: authenticated
                claims: '{"sub": "u1"}'
            log:
              format: logfmt
              categories:
                database: debug
            event_log:
              path: \(directory.path)/events.jsonl
              max_size: 10M
            metrics:
              listen: 127.0.0.1:9187
            realtime:
              listen: 127.0.0.1:4000
              keys:
                web:
                  key: abcdefghijklmnopqrstuvwx
                  schemas: [public]
                  tables: [public.course]
                  ops: [INSERT]
                  where: id.gt.0
                  topics: [lobby]
                  queries: [enrolments_*]
                  rls: true
                  role: kiosk
                  claims: '{"sub": "kiosk"}'
              jwt:
                secret_file: \(directory.path)/jwt
                roles:
                  anon: {}
            nats:
              servers: [nats://127.0.0.1:4222]
              subject: pgherald.{schema}.{table}.{op}
              stream: PGHERALD
              create_stream: true
              duplicate_window: 5m
              table: public.course
              op: INSERT
              where: id.gt.0
              user: herald
              password_file: \(directory.path)/password
              tls: true
              ca_file: \(directory.path)/password
              max_in_flight: 100
              ack_timeout: 3s
            cluster:
              name: app
              nats: [nats://127.0.0.1:4222]
              member: web-1
              heartbeat: 1s
              member_timeout: 5s
              user: herald
              password_file: \(directory.path)/password
              tls: true
              ca_file: \(directory.path)/password
              stream: PGHERALD
            console:
              enabled: true
              listen: 127.0.0.1:9188
              key: 0123456789abcdef0123
            http:
              listen: [127.0.0.1:8443]
              cors:
                origins: [https://app.example.com]
              plaintext: false
              max_connections: 100
            tls:
              cert_file: \(certificates.certificatePath)
              key_file: \(certificates.keyPath)
            queries:
              enrolments_by_course:
                sql: select course_id, count(*) as enrolled from enrols_in where course_id = $1 group by 1
                key: [course_id]
                params: [course_id]
                tables: [public.enrols_in]
                as: subscriber
            webhooks:
              orders:
                url: http://127.0.0.1:9/hook
                table: public.course
                op: INSERT
                where: id.gt.0
                secrets: [whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw]
                headers:
                  x-test: one
            """.write(to: file, atomically: true, encoding: .utf8)
            let check = try await DaemonProcess(["check-config", file.path]).finish()
            #expect(check.status == 0, "\(check.stderr)")
            let read = Set(check.stdout.split(separator: "\n").compactMap { line -> String? in
                guard let colon = line.firstIndex(of: ":"), !line.hasPrefix(" "), !line.hasPrefix("#") else { return nil }
                return Self.pattern(String(line[..<colon]))
            })
            #expect(read.contains("socket.subscriber_buffer") && read.contains("webhooks.NAME.url"), "\(check.stdout)")
            let documented = Self.keysFromPage(try Self.page("pgherald.yaml.5"))
            #expect(read.subtracting(documented).sorted() == [], "keys serve reads that pgherald.yaml(5) lacks: run scripts/man-pages")
            // Second ways to give a secret, which one file cannot hold beside the first, and the
            // JWT roles, which check-config counts rather than prints.
            // The console is on with a console: section, which is no setting of its own.
            let alternatives: Set = ["console", "console.key_file", "webhooks.NAME.secret", "webhooks.NAME.secret_file", "realtime.keys.NAME.key_file", "realtime.jwt.roles.NAME", "nats.token_file",
                                      "nats.nkey_seed_file", "nats.credentials_file", "cluster.token_file", "cluster.nkey_seed_file",
                                      "cluster.credentials_file"]
            #expect(documented.subtracting(read).subtracting(alternatives).sorted() == [], "pgherald.yaml(5) names keys serve does not read")
        }
    }
}

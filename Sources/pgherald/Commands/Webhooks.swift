import ArgumentParser
import Foundation
import HeraldConfiguration
import HeraldSettings
import HeraldPostgres
import HeraldWebhooks

struct Webhooks: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Inspect and repair webhook delivery.",
        discussion: """
            These commands work on the database (pgherald.webhook_delivery and \
            pgherald.webhook_dead_letter), so they run whether the daemon is up or not. \
            They read the same configuration as serve: --config, PGHERALD_* variables and --db.
            """,
        subcommands: [List.self, Dead.self, Replay.self, SendTest.self]
    )

    /// --config and --db, as serve takes them.
    struct Settings: ParsableArguments {
        @Option(help: ArgumentHelp("The configuration file. Default: \(ConfigurationSources.defaultFile), if it exists.", valueName: "file"))
        var config: String?

        @OptionGroup var database: DatabaseOptions

        func load() async throws -> DaemonConfiguration {
            var flags: [String: ConfigurationSources.Flag] = [:]
            if let db = database.db { flags["database"] = .init(name: "--db", value: db) }
            return try await DaemonConfiguration.loadOrExit(from: ConfigurationSources(
                file: config ?? ConfigurationSources.defaultFile, fileRequired: config != nil,
                environment: ProcessInfo.processInfo.environment, flags: flags
            ))
        }

        func store() async throws -> (DaemonConfiguration, WebhookStore) {
            let configuration = try await load()
            let store = WebhookStore(connection: configuration.database, daemon: configuration.name, applicationName: "pgherald-webhooks-cli")
            do {
                try await store.checkInstalled()
            } catch {
                FileHandle.standardError.write(Data("Error: \(error)\n".utf8))
                // sysexits.h's EX_UNAVAILABLE: the database could not be used.
                throw ExitCode(69)
            }
            return (configuration, store)
        }
    }

    struct List: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Each endpoint with its pending, in-flight, failing and dead deliveries.",
            discussion: "Endpoints in the database but no longer in the configuration are listed as not configured; their deliveries wait until they return."
        )

        @OptionGroup var settings: Settings

        func run() async throws {
            let (configuration, store) = try await settings.store()
            let backlogs = try await store.backlogs()
            let configured = (configuration[WebhookService.self] ?? []).map(\.name)
            let names = configured + backlogs.keys.filter { !configured.contains($0) }.sorted()
            guard !names.isEmpty else {
                print("no webhook endpoints are configured, and none have deliveries in the database")
                return
            }
            for name in names {
                let backlog = backlogs[name] ?? WebhookStore.Backlog()
                let endpoint = (configuration[WebhookService.self] ?? []).first { $0.name == name }
                print("\(name)  \(endpoint.map(\.url) ?? "(not configured)")\(endpoint?.ordered == true ? "  ordered" : "")")
                let journal = backlog.inJournal > 0 ? " (\(backlog.inJournal) of them still in the journal, every table)" : ""
                print("  pending \(backlog.pending)\(journal), in flight \(backlog.inFlight), failing \(backlog.failing), dead \(backlog.dead)")
                if let oldest = backlog.oldestPendingSeconds {
                    print("  oldest pending: \(String(format: "%.1f", oldest)) s")
                }
                if backlog.lastStatus != nil || backlog.lastError != nil {
                    print("  last failure: \(backlog.lastStatus.map { "HTTP \($0)" } ?? "no answer")\(backlog.lastError.map { ", \($0)" } ?? "")")
                }
                if endpoint?.ordered == true, backlog.failing > 0, let held = backlog.heldBy {
                    print("  held: event \(held) is being retried, and the \(backlog.pending - 1) behind it wait (ordered)")
                }
            }
        }
    }

    struct Dead: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Deliveries given up on: the last status, the reason and the start of the answer.")

        @OptionGroup var settings: Settings

        @Option(help: "Only this endpoint's.")
        var endpoint: String?

        @Flag(help: "One JSON object per line, with the event body.")
        var json = false

        func run() async throws {
            let (_, store) = try await settings.store()
            let letters = try await store.deadLetters(endpoint: endpoint)
            if json {
                let encoder = JSONEncoder()
                encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
                for letter in letters { print(String(decoding: try encoder.encode(letter), as: UTF8.self)) }
                return
            }
            guard !letters.isEmpty else {
                print("no dead letters\(endpoint.map { " for \($0)" } ?? "")")
                return
            }
            for letter in letters {
                print("\(letter.id)  \(letter.endpoint)  event \(letter.eventID)  \(letter.failedAt)  \(letter.attempts) attempt(s)  \(letter.lastStatus.map { "HTTP \($0)" } ?? "no answer")")
                print("  \(letter.error)")
                if let excerpt = letter.responseExcerpt {
                    print("  answer: \(excerpt.prefix(200).replacingOccurrences(of: "\n", with: " "))")
                }
            }
        }
    }

    struct Replay: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Queue dead letters again, with fresh attempts.",
            discussion: "Give dead-letter ids (from `webhooks dead`), or --endpoint NAME --all. A running daemon sends them within a second."
        )

        @OptionGroup var settings: Settings

        @Argument(help: "Dead-letter ids.")
        var ids: [Int64] = []

        @Option(help: "With --all: every dead letter of this endpoint.")
        var endpoint: String?

        @Flag(help: "Replay every dead letter of --endpoint.")
        var all = false

        func validate() throws {
            if all, endpoint == nil { throw ValidationError("--all needs --endpoint NAME") }
            if ids.isEmpty, !all { throw ValidationError("give dead-letter ids, or --endpoint NAME --all") }
            if !ids.isEmpty, all { throw ValidationError("give ids or --all, not both") }
        }

        func run() async throws {
            let (_, store) = try await settings.store()
            let replayed = try await store.replay(ids: ids, endpoint: all ? endpoint : nil)
            print("queued \(replayed.queued) deliver\(replayed.queued == 1 ? "y" : "ies") again")
            let missing = ids.filter { !replayed.revived.contains($0) }
            guard missing.isEmpty else {
                let list = missing.map(String.init).joined(separator: ", ")
                FileHandle.standardError.write(Data("Error: no dead letter \(list); `pgherald webhooks dead` lists them\n".utf8))
                throw ExitCode.failure
            }
        }
    }

    struct SendTest: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "send-test",
            abstract: "Post a signed test event to an endpoint now, and show the answer.",
            discussion: "The event is not queued: nothing is retried and nothing reaches the database. Its table is pgherald.test."
        )

        @OptionGroup var settings: Settings

        @Argument(help: "The endpoint's name in the configuration.")
        var name: String

        func run() async throws {
            let configuration = try await settings.load()
            guard let endpoint = (configuration[WebhookService.self] ?? []).first(where: { $0.name == name }) else {
                let known = (configuration[WebhookService.self] ?? []).map(\.name)
                throw ValidationError("no endpoint named '\(name)' in the configuration\(known.isEmpty ? "" : " (known: \(known.joined(separator: ", ")))")")
            }
            let result = await WebhookTest.send(to: endpoint, version: PGHerald.configuration.version)
            print("\(endpoint.url): \(result.outcome.status.map { "HTTP \($0)" } ?? "no answer")\(result.outcome.error.map { " (\($0))" } ?? "") in \(result.elapsed.secondsText)")
            if let excerpt = result.excerpt { print(excerpt) }
            if case .delivered = result.outcome { return }
            throw ExitCode(1)
        }
    }
}

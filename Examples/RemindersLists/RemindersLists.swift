import ArgumentParser
import ExampleSupport
import Foundation
import HeraldClient

struct RemindersList: Decodable, Sendable, Equatable {
    var id: Int
    var title: String
}

struct Reminder: Decodable, Sendable, Equatable {
    var id: Int
    var title: String
    var isCompleted: Bool
}

/// A list with its reminders: one row of the live query, whose `id` and
/// `title` are the list's and whose `reminders` column is their `json_agg`.
struct Row: Decodable, Sendable, Equatable {
    let list: RemindersList
    let reminders: [Reminder]

    private enum CodingKeys: String, CodingKey {
        case reminders
    }

    init(from decoder: any Decoder) throws {
        list = try RemindersList(from: decoder)
        reminders = try decoder.container(keyedBy: CodingKeys.self).decode([Reminder].self, forKey: .reminders)
    }
}

/// Reminder lists, each with its reminders, from one live query. Each
/// result says which lists changed: one reminder's change redraws its list only.
@main
struct RemindersLists: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Reminder lists with their reminders, kept current by pgherald's live query reminders_lists.",
        discussion: "Needs `pgherald serve --config Examples/RemindersLists/pgherald.yaml` on a database loaded from Examples/RemindersLists/reminders.sql."
    )

    @OptionGroup var daemon: DaemonOptions

    @Option(help: "Stop after this many results (0: run until interrupted).")
    var count = 0

    @MainActor
    func run() async throws {
        try await daemon.withClient { client in
            var previous: [Int: Row] = [:]
            try await LiveQueryModel(client: client, query: "reminders_lists", as: Row.self).showResults(count: count) { rows, update in
                let changed = rows.filter { previous[$0.list.id] != $0 }.map(\.list.title)
                previous = Dictionary(uniqueKeysWithValues: rows.map { ($0.list.id, $0) })
                Self.draw(rows, changed: changed, update: update)
                return true
            }
        }
    }

    static func draw(_ rows: [Row], changed: [String], update: UInt64) {
        var lines = ["Reminders (result \(update)); changed: \(changed.joined(separator: ", "))"]
        for row in rows {
            let done = row.reminders.count(where: \.isCompleted)
            lines.append("  \(row.list.title) (\(done)/\(row.reminders.count) done)")
            for reminder in row.reminders {
                lines.append("    [\(reminder.isCompleted ? "x" : " ")] \(reminder.title)")
            }
        }
        // Unbuffered, so a pipe sees each result as it comes.
        FileHandle.standardOutput.write(Data((lines.joined(separator: "\n") + "\n\n").utf8))
    }
}

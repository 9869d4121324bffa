import ArgumentParser
import Foundation
import Herald
import HeraldClient
import HeraldPostgres

struct Demo: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "A live view of the enrolment example's \"enrolments by course\".",
        discussion: """
            Needs a database with sql/examples/enrolment.sql and a running `pgherald serve`. \
            The view model reloads whenever the daemon reports a change over its socket, so \
            inserting into enrols_in or course from psql updates the table by itself. On a \
            terminal the view redraws in place; otherwise each refresh prints a snapshot. If the \
            daemon cannot be reached at the start, demo says why and exits with status 69, unless \
            --retry asks it to wait; while the daemon is away, the view says it is not live.
            """
    )

    @OptionGroup var database: DatabaseOptions
    @OptionGroup var socket: DaemonSocketOptions

    @Flag(help: "Wait for the daemon if it cannot be reached at the start, instead of exiting.")
    var retry = false

    @MainActor
    func run() async throws {
        let connection = try database.connectionStringWarningOnStderr()
        let socketPath = try await socket.path()
        let terminal = isatty(STDOUT_FILENO) == 1
        let client = HeraldClient(socketPath: socketPath)
        if !retry {
            do {
                _ = try await client.statistics()
            } catch {
                FileHandle.standardError.write(Data("Error: \(error)\n".utf8))
                throw ExitCode(Tail.unavailableExitCode)
            }
        }
        let notifier = ChangeNotifier()
        var problem: String?
        let viewModel = EnrolmentsByCourseViewModel(connectionString: connection) { viewModel in
            Self.render(viewModel, changeCount: notifier.changeCount, socket: socketPath, problem: problem, redraw: terminal)
        }
        notifier.register(viewModel)
        await viewModel.refresh()
        try await notifier.follow(client, filter: EventFilter(tables: [
            TableName(name: "course"), TableName(name: "student"), TableName(name: "enrols_in"),
        ])) { error in
            guard error?.message != problem else { return }
            problem = error?.message
            Self.render(viewModel, changeCount: notifier.changeCount, socket: socketPath, problem: problem, redraw: terminal)
        }
    }

    @MainActor
    static func render(_ viewModel: EnrolmentsByCourseViewModel, changeCount: UInt64, socket: String, problem: String?, redraw: Bool) {
        var lines = ["Enrolments by course (refresh \(viewModel.refreshes), changeCount \(changeCount))", ""]
        let width = viewModel.rows.map(\.name.count).max() ?? 0
        for row in viewModel.rows {
            let count = String(row.enrolled)
            lines.append("  \(row.shortCode.padding(toLength: 6, withPad: " ", startingAt: 0))  \(row.name.padding(toLength: width, withPad: " ", startingAt: 0))  \(String(repeating: " ", count: max(0, 3 - count.count)))\(count)")
        }
        if let error = viewModel.lastError { lines += ["", "  (cannot refresh: \(error))"] }
        if let problem { lines += ["", "  (not live: \(problem); retrying)"] }
        if redraw {
            lines += ["", "Live over \(socket). Change course or enrols_in from psql; Ctrl-C to quit."]
            print("\u{1B}[H\u{1B}[2J" + lines.joined(separator: "\n"))
        } else {
            print(lines.joined(separator: "\n") + "\n")
        }
        fflush(nil)
    }
}

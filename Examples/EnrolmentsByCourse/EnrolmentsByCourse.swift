import ArgumentParser
import ExampleSupport
import Foundation
import HeraldClient

/// One row of the live query `enrolments_by_course` (see pgherald.yaml beside this file),
/// decoded as the seed app decodes its Supabase rows.
struct CourseEnrolment: Decodable, Sendable {
    var courseId: Int
    var name: String
    var enrolled: Int64
}

/// The seed app's "enrolments by course" screen, rebuilt on a live query.
///
/// The seed app keeps an `EnrollmentChangeNotifier` that bumps `changeCount`
/// on every change, and a view model that runs its query again each time.
/// Here the daemon runs the query, once for every app that shows it, and
/// ``LiveQueryModel`` holds its rows: the view only draws them.
@main
struct EnrolmentsByCourse: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Enrolments by course, kept current by pgherald's live query enrolments_by_course.",
        discussion: "Needs `pgherald serve --config Examples/EnrolmentsByCourse/pgherald.yaml` on the enrolment example (scripts/demo starts one)."
    )

    @OptionGroup var daemon: DaemonOptions

    @Option(help: "Stop after this many results (0: run until interrupted).")
    var count = 0

    @MainActor
    func run() async throws {
        try await daemon.withClient { client in
            try await LiveQueryModel(client: client, query: "enrolments_by_course", as: CourseEnrolment.self).showResults(count: count) { rows, update in
                Self.draw(rows, update: update)
                return true
            }
        }
    }

    static func draw(_ rows: [CourseEnrolment], update: UInt64) {
        let width = rows.map(\.name.count).max() ?? 0
        var lines = ["Enrolments by course (result \(update))"]
        for row in rows.sorted(by: { $0.courseId < $1.courseId }) {
            lines.append("  \(row.name.padding(toLength: width, withPad: " ", startingAt: 0))  \(row.enrolled)")
        }
        // Unbuffered, so a pipe sees each result as it comes.
        FileHandle.standardOutput.write(Data((lines.joined(separator: "\n") + "\n\n").utf8))
    }
}

import Herald
import HeraldPostgres
import Testing

@MainActor
final class EnrolmentsByCourseViewModel: RefreshableViewModel {
    let database: TestDatabase
    var refreshes = 0
    var enrolledInFunctions = 0

    init(database: TestDatabase) { self.database = database }

    func refresh() async {
        refreshes += 1
        let database = self.database
        // libpq blocks; keep it off the main actor, which other tests share.
        let count = await Task.detached {
            try? database.execute("SELECT count(*) FROM enrols_in WHERE course_id = 2").rows.first?.first ?? nil
        }.value
        enrolledInFunctions = Int(count ?? "") ?? -1
    }
}

extension IntegrationTests {
    @Suite
    @MainActor
    struct ChangeNotifierIntegrationTests {
        @Test func aThousandRowTransactionRefreshesTheViewModelOnce() async throws {
            let database = try TestDatabase.create()
            try database.execute("CREATE TABLE mark (id int PRIMARY KEY, score int)")
            try database.execute("INSERT INTO mark SELECT g, 0 FROM generate_series(1, 1000) g")
            let daemon = try await RunningListener(database: database)
            // The default timing is unit-tested; here a wider quiet period keeps
            // a starved CI machine from splitting the burst while the real
            // database → listener → broker → notifier path is checked.
            let notifier = ChangeNotifier(configuration: .init(quietPeriod: .milliseconds(200)))
            let viewModel = EnrolmentsByCourseViewModel(database: database)
            notifier.register(viewModel)
            let following = Task { await notifier.run(broker: daemon.broker) }
            try await waitFor { daemon.broker.statistics.subscriberCount == 2 }

            try database.execute("UPDATE mark SET score = score + 1")
            try await waitFor(seconds: 10) { notifier.changeCount == 1000 && notifier.refreshCount == 1 }
            try await Task.sleep(for: .milliseconds(200))
            #expect(viewModel.refreshes == 1)

            try database.execute("DELETE FROM enrols_in WHERE student_id = 1 AND course_id = 2")
            try await waitFor(seconds: 10) { viewModel.enrolledInFunctions == 2 }
            #expect(viewModel.refreshes == 2)
            following.cancel()
            try await daemon.stop()
        }
    }
}

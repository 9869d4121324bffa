import Testing
@testable import Herald

@MainActor
final class CountingViewModel: RefreshableViewModel {
    var refreshes = 0
    var running = false
    var overlapped = false
    var delay: Duration = .zero

    func refresh() async {
        if running { overlapped = true }
        running = true
        if delay > .zero { try? await Task.sleep(for: delay) }
        refreshes += 1
        running = false
    }
}

@Suite @MainActor struct ChangeNotifierTests {
    @Test func aThousandRowBurstRefreshesEachViewModelOnce() async throws {
        let broker = Broker()
        let notifier = ChangeNotifier()
        let first = CountingViewModel()
        let second = CountingViewModel()
        notifier.register(first)
        notifier.register(second)
        let running = Task { await notifier.run(broker: broker) }
        try await waitUntil { broker.statistics.subscriberCount == 1 }

        broker.publish((1...1000).map { makeEvent($0, table: "enrols_in", operation: .update, transaction: "42") })
        try await waitUntil { notifier.refreshCount == 1 && notifier.changeCount == 1000 }
        try await Task.sleep(for: .milliseconds(100))
        #expect(notifier.changeCount == 1000)
        #expect(first.refreshes == 1)
        #expect(second.refreshes == 1)
        running.cancel()
    }

    @Test func refreshesNeverOverlapAndLateChangesAreNotLost() async throws {
        let notifier = ChangeNotifier(configuration: .init(quietPeriod: .milliseconds(5), maximumDelay: .milliseconds(50)))
        let viewModel = CountingViewModel()
        viewModel.delay = .milliseconds(100)
        notifier.register(viewModel)
        notifier.recordChange(transaction: nil)
        try await waitUntil { viewModel.running }
        notifier.recordChange(transaction: nil)
        notifier.recordChange(transaction: nil)
        try await waitUntil { viewModel.refreshes == 2 }
        try await Task.sleep(for: .milliseconds(150))
        #expect(viewModel.refreshes == 2)
        #expect(!viewModel.overlapped)
        #expect(notifier.changeCount == 3)
    }

    @Test func viewModelsAreHeldWeakly() async throws {
        let notifier = ChangeNotifier()
        var viewModel: CountingViewModel? = CountingViewModel()
        weak let weakViewModel = viewModel
        notifier.register(viewModel!)
        viewModel = nil
        #expect(weakViewModel == nil)
        notifier.recordChange(transaction: nil)
        try await waitUntil { notifier.refreshCount == 1 }
    }
}

/// Polls `condition` on the main actor until it holds, failing after `seconds`.
@MainActor
func waitUntil(seconds: Double = 5, _ condition: @MainActor () -> Bool) async throws {
    let deadline = ContinuousClock.now + .seconds(seconds)
    while !condition() {
        guard ContinuousClock.now < deadline else { throw TimeoutError(seconds: seconds) }
        try await Task.sleep(for: .milliseconds(2))
    }
}

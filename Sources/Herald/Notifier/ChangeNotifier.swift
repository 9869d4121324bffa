public import Observation

/// The in-process change notifier: subscribes once, counts changes, and
/// refreshes registered view models.
///
/// `changeCount` moves on every event, so observers (SwiftUI's
/// `onChange(of:)`, or `withObservationTracking`) can react. Registered view
/// models are refreshed with coalescing: a burst of changes gives one
/// `refresh()` per view model (see ``RefreshCoalescer``).
@MainActor
@Observable
public final class ChangeNotifier {
    /// Events seen since the notifier started.
    public private(set) var changeCount: UInt64 = 0
    /// Completed refresh rounds, each of which refreshed every registered view model.
    public private(set) var refreshCount: UInt64 = 0

    @ObservationIgnored private var coalescer: RefreshCoalescer
    @ObservationIgnored private var viewModels: [WeakViewModel] = []
    @ObservationIgnored private var timer: Task<Void, Never>?

    public init(configuration: RefreshCoalescer.Configuration = .init()) {
        coalescer = RefreshCoalescer(configuration: configuration)
    }

    /// Adds a view model; the notifier holds it weakly.
    public func register(_ viewModel: any RefreshableViewModel) {
        viewModels.removeAll { $0.viewModel == nil || $0.viewModel === viewModel }
        viewModels.append(WeakViewModel(viewModel: viewModel))
    }

    public func unregister(_ viewModel: any RefreshableViewModel) {
        viewModels.removeAll { $0.viewModel == nil || $0.viewModel === viewModel }
    }

    /// Counts `events` until the sequence ends or the task is cancelled.
    public func consume(_ events: some AsyncSequence<Event, some Error>) async throws {
        for try await event in events {
            recordChange(transaction: event.transactionID)
        }
    }

    /// Follows the broker until the task is cancelled or the broker shuts down.
    ///
    /// If the notifier ever falls too far behind, it counts that as a change
    /// (every view model refreshes) and subscribes again.
    public func run(broker: Broker, filter: EventFilter = .all) async {
        var subscription = broker.subscribe(filter)
        while !Task.isCancelled {
            do {
                let batch = try await subscription.nextBatch()
                if batch.isEmpty { return }
                for event in batch { recordChange(transaction: event.transactionID) }
            } catch {
                recordChange(transaction: nil)
                subscription = broker.subscribe(filter)
            }
        }
    }

    /// Counts one change and schedules a coalesced refresh.
    /// - Parameter transaction: the change's transaction id, if known.
    public func recordChange(transaction: String?) {
        changeCount += 1
        perform(coalescer.changeArrived(at: .now, transaction: transaction))
    }

    private func perform(_ action: RefreshCoalescer.Action) {
        switch action {
        case .none:
            break
        case .startTimer(let deadline):
            timer = Task { [weak self] in
                try? await Task.sleep(until: deadline, clock: .continuous)
                guard let self, !Task.isCancelled else { return }
                self.perform(self.coalescer.timerFired(at: .now))
            }
        case .refresh:
            timer = Task { [weak self] in
                guard let self else { return }
                for entry in self.viewModels {
                    await entry.viewModel?.refresh()
                }
                self.refreshCount += 1
                self.perform(self.coalescer.refreshFinished(at: .now))
            }
        }
    }

    private struct WeakViewModel {
        weak var viewModel: (any RefreshableViewModel)?
    }
}

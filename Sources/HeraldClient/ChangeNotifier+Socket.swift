public import Herald

extension ChangeNotifier {
    /// Follows a daemon over its socket until the task is cancelled: every
    /// event moves `changeCount`. A reconnect resumes where the stream
    /// stopped, so the missed events arrive and count; a reset (the daemon
    /// could not resume) moves it too, so view models refetch.
    public func follow(_ client: HeraldClient, filter: EventFilter = .all) async throws {
        for try await message in client.messages(filter) {
            switch message {
            case .event(let event): recordChange(transaction: event.transactionID)
            case .reconnected: break
            case .reset: recordChange(transaction: nil)
            }
        }
    }
}

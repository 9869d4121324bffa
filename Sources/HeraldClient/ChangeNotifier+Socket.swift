public import Herald

extension ChangeNotifier {
    /// Follows a daemon over its socket until the task is cancelled: every
    /// event moves `changeCount`, and so does every reconnect, because events
    /// may have been missed in between and view models should refetch.
    public func follow(_ client: HeraldClient, filter: EventFilter = .all) async throws {
        for try await message in client.messages(filter) {
            switch message {
            case .event(let event): recordChange(transaction: event.transactionID)
            case .reconnected: recordChange(transaction: nil)
            }
        }
    }
}

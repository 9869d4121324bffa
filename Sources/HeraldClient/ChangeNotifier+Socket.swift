public import Herald

extension ChangeNotifier {
    /// Follows a daemon over its socket until the task is cancelled: every
    /// event moves `changeCount`. A reconnect resumes where the stream
    /// stopped, so the missed events arrive and count; a reset (the daemon
    /// could not resume) moves it too, so view models refetch.
    ///
    /// - Parameter onConnection: called with the reason whenever the daemon
    ///   cannot be reached (the notifier keeps trying), and with `nil` once
    ///   events flow again, so a view can show that it is not live.
    public func follow(
        _ client: HeraldClient,
        filter: EventFilter = .all,
        onConnection: (HeraldClientError?) -> Void = { _ in }
    ) async throws {
        var unreachable = false
        for try await message in client.messages(filter) {
            switch message {
            case .event(let event): recordChange(transaction: event.transactionID)
            case .transaction(let group): recordChange(transaction: group.transactionID)
            case .reconnected: break
            case .reset: recordChange(transaction: nil)
            case .unreachable(let error):
                unreachable = true
                onConnection(error)
                continue
            }
            if unreachable {
                unreachable = false
                onConnection(nil)
            }
        }
    }
}

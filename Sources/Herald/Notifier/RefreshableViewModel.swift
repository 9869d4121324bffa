/// A view model that reloads what it shows when the database changes.
///
/// Register it with a ``ChangeNotifier``; the notifier calls `refresh()`
/// once per burst of changes, never concurrently with itself.
@MainActor
public protocol RefreshableViewModel: AnyObject {
    func refresh() async
}

/// Whether the triggers write the journal as well as notify.
public enum Durability: String, Sendable, CaseIterable {
    /// Journal row and NOTIFY in the user's transaction: catch-up after any
    /// gap is exact, and large rows are delivered whole.
    case durable
    /// NOTIFY alone: cheaper for writers, but events sent while the daemon is
    /// not listening are lost, and rows too large to notify arrive without data.
    case notifyOnly = "notify-only"
}

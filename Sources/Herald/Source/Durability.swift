/// Whether the triggers write the journal as well as notify.
public enum Durability: String, Sendable, CaseIterable {
    /// A journal row in the user's transaction, and NOTIFY only while a daemon
    /// is parked (the doorbell): catch-up after any gap is exact, and large rows
    /// are delivered whole.
    case durable
    /// NOTIFY alone, in every write: events sent while the daemon is not
    /// listening are lost, and rows too large to notify arrive without data.
    case notifyOnly = "notify-only"

    /// What `install` and `check-config` warn about notify-only mode.
    public static let notifyOnlyCeiling = "notify-only: every write notifies, and PostgreSQL commits notifying transactions "
        + "one at a time behind one lock held through the commit's flush, which caps the whole database at a few thousand "
        + "commits per second however many writers there are (README, scenario l.); durable, the default, with a short "
        + "retention keeps little and spares writers that lock"
}

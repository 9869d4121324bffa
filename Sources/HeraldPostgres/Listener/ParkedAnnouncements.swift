import Herald

/// While the listener is parked, which events reached it without their
/// notification: what the backstop counts as lost on the way, and what
/// should stay 0.
///
/// A sweep that finds an event whose notification has not come yet cannot
/// tell lost from late: it remembers it, and the event is lost only if the
/// next tick (which confirms a sweep) arrives before the notification. A
/// transaction whose notification came while some transaction was unrung is
/// left to a sweep (see ``DeliveryCursor``): the sweep that finds it has
/// nothing lost to count.
struct ParkedAnnouncements: Equatable {
    /// Events sweeps found before any notification announced them, by transaction.
    private(set) var unannounced: [UInt64: Int] = [:]
    /// Transactions announced, and left to a sweep.
    private(set) var announced: Set<UInt64> = []

    /// A sweep found an event of `transactionID`; whether it counts as lost
    /// now: when the sweep is the one a tick confirms (`confirmed`).
    /// Otherwise it waits for its notification or the next tick.
    mutating func found(transactionID: UInt64, confirmed: Bool) -> Bool {
        guard !announced.contains(transactionID) else { return false }
        if confirmed { return true }
        unannounced[transactionID, default: 0] += 1
        return false
    }

    /// The notification of `transactionID` came: its events were not lost.
    mutating func rang(_ transactionID: UInt64) {
        unannounced[transactionID] = nil
    }

    /// The notification of `transactionID` came, and a sweep delivers it.
    mutating func leftToSweep(_ transactionID: UInt64) {
        announced.insert(transactionID)
    }

    /// A sweep read up to `snapshot`: what it covered is no longer waited for.
    mutating func swept(to snapshot: TransactionSnapshot) {
        if !announced.isEmpty { announced = announced.filter { !snapshot.isVisible($0) } }
    }

    /// A tick confirmed the sweep up to `snapshot`: the events found before
    /// it whose notification never came; they are forgotten.
    mutating func tickConfirmed(_ snapshot: TransactionSnapshot) -> Int {
        var lost = 0
        unannounced = unannounced.filter { transactionID, events in
            guard snapshot.isVisible(transactionID) else { return true }
            lost += events
            return false
        }
        return lost
    }

    /// Unparked, notifications come for everything again.
    mutating func unparked() {
        unannounced = [:]
        announced = []
    }
}

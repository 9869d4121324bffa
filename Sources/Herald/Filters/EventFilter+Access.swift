extension EventFilter {
    /// This filter narrowed to what `scope` lets through.
    ///
    /// A filter naming tables is refused unless a grant covers each of them
    /// for one of the operations it asks for. A filter naming none is
    /// narrowed to the grants' tables, operations and conditions, and is
    /// refused only when no grant has an operation it asks for. Either way,
    /// every event it then matches is one the scope lets through: live,
    /// replayed from the broker's history, or read back from the journal.
    public func narrowed(to scope: AccessScope) throws(AccessDenied) -> EventFilter {
        guard case .grants(let grants, let rules) = scope else { return self }
        guard !grants.isEmpty else { throw AccessDenied("no access rule grants this user or any of its groups anything") }
        if operations == .broadcast {
            // Public topics are open; each private broadcast is checked against the grants' topics.
            var narrowed = self
            narrowed.access = grants
            return narrowed
        }
        let relevant = grants.filter { !$0.operations.isDisjoint(with: operations) }
        let granting = "(granted by \(rules.joined(separator: ", ")))"
        guard !relevant.isEmpty else { throw AccessDenied("none of these operations is granted \(granting)") }
        var narrowed = self
        if let tables {
            for table in tables.sorted() where !relevant.contains(where: { $0.covers(table) }) {
                throw AccessDenied("\(table) is not granted for these operations \(granting)")
            }
            narrowed.access = relevant.filter { grant in tables.contains { grant.covers($0) } }
        } else {
            narrowed.access = relevant
        }
        return narrowed
    }

    /// This broadcast filter with private broadcasts let through only on
    /// `readable`, the topics that the subscriber's own database policies
    /// let it read: its grants' `topics:` no longer decide.
    public func privateTopics(readableByPolicy readable: Set<String>) -> EventFilter {
        var narrowed = self
        narrowed.access = (access ?? [AccessGrant()]).map { grant in
            var decided = grant
            decided.topicsReadableByPolicy = readable
            return decided
        }
        return narrowed
    }
}

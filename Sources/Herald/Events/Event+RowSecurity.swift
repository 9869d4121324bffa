/// Which of an event's row images a row-level-security subscriber may see.
public struct RowVisibility: Sendable, Hashable {
    public var new: Bool
    public var old: Bool

    public init(new: Bool, old: Bool) {
        self.new = new
        self.old = old
    }
}

extension Event {
    /// This event as a subscriber sees it when `visibility` says which rows
    /// its policies let it select and `columns` which columns (nil: all);
    /// nil when it sees nothing of it.
    ///
    /// An UPDATE whose old row it could not see arrives with `old` empty, as
    /// a row coming into view; one whose new row it cannot see arrives as
    /// ``leftView``, with the old row only. An event whose rows were too
    /// large to carry cannot be judged, and is withheld.
    public func restricted(to visibility: RowVisibility, columns: Set<String>?) -> Event? {
        if rowDataOmitted { return nil }
        let new = visibility.new ? newJSON.map { Self.keeping(columns, of: $0) } : nil
        let old = visibility.old ? oldJSON.map { Self.keeping(columns, of: $0) } : nil
        switch operation {
        case .insert: guard new != nil else { return nil }
        case .delete: guard old != nil else { return nil }
        case .update: guard new != nil || old != nil else { return nil }
        case .truncate, .broadcast: return self
        }
        let leavesView = operation == .update && new == nil
        let comesIntoView = operation == .update && new != nil && old == nil
        if columns == nil, !leavesView, !comesIntoView { return self }
        // A row that left the view is shown by what the subscriber saw: its old key, never the new one.
        let key = leavesView ? primaryKeyJSON.flatMap { Self.key($0, takenFrom: oldJSON) } : primaryKeyJSON
        return Event(
            id: id, count: count, operation: operation, table: table,
            primaryKeyJSON: key.map { Self.keeping(columns, of: $0) },
            newJSON: new, oldJSON: comesIntoView ? RawJSON(.object([:])) : old,
            transactionID: transactionID, at: at, rowDataOmitted: false, leftView: leavesView, partition: partition
        )
    }

    /// The key's columns as `row` has them; nil when the row lacks one.
    private static func key(_ key: RawJSON, takenFrom row: RawJSON?) -> RawJSON? {
        guard case .object(let columns) = key.value, case .object(let values)? = row?.value else { return nil }
        var taken = JSONObject()
        for name in columns.keys {
            guard let value = values[name] else { return nil }
            taken[name] = value
        }
        return RawJSON(.object(taken))
    }

    private static func keeping(_ columns: Set<String>?, of row: RawJSON) -> RawJSON {
        guard let columns, case .object(let object) = row.value else { return row }
        var kept = JSONObject()
        // Byte for byte: a hidden column whose name only looks like a visible one's stays hidden.
        for (key, value) in object where columns.contains(where: { $0.hasSameBytes(as: key) }) { kept[key] = value }
        return kept.count == object.count ? row : RawJSON(.object(kept))
    }
}

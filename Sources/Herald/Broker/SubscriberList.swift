extension Broker {
    /// Subscribers in an array, for the fan-out loop to walk, with their
    /// positions by id, so that adding and removing one are O(1).
    struct SubscriberList {
        private(set) var members: ContiguousArray<Subscriber> = []
        private var positions: [UInt64: Int] = [:]

        var isEmpty: Bool { members.isEmpty }

        mutating func insert(_ subscriber: Subscriber) {
            positions[subscriber.id] = members.count
            members.append(subscriber)
        }

        /// Removes the subscriber by moving the last one into its place; order is not kept.
        mutating func remove(id: UInt64) -> Subscriber? {
            guard let position = positions.removeValue(forKey: id) else { return nil }
            let removed = members[position]
            let last = members.removeLast()
            if position < members.count {
                members[position] = last
                positions[last.id] = position
            }
            return removed
        }
    }
}

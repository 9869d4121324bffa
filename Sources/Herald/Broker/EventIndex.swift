import DequeModule

/// Event id → change count for the events a history holds, for resumes by id.
///
/// Journal ids are numbers that the history receives in nearly rising
/// order, so they are kept in blocks of 64 consecutive ids: an append
/// writes into the block the previous one wrote, and no per-event hash is
/// taken. Entries are not removed as events leave the history; a lookup
/// checks its answer against the events still held (``EventHistory``), and
/// whole blocks go once everything they count has left. Any other id (an
/// event sent by hand) is kept in a dictionary.
struct EventIndex {
    private static let blockSize: UInt64 = 64

    /// The counts of ids `key * 64 ..< (key + 1) * 64`, 0 where none was counted.
    private struct Block {
        var counts = [UInt64](repeating: 0, count: Int(EventIndex.blockSize))
        /// The highest count written into the block: it is stale once the history let that count go.
        var highestCount: UInt64 = 0
    }

    private var blocks: [UInt64: Block] = [:]
    /// Block keys in the order they were made, for dropping the stale ones oldest first.
    private var blockOrder: Deque<UInt64> = []
    /// The block the last append wrote, held out of `blocks` until an append needs another one.
    private var open: (key: UInt64, block: Block)?
    private var named: [String: UInt64] = [:]

    /// Records that the event `id` was delivered with `count`.
    mutating func insert(_ id: String, count: UInt64) {
        guard let number = Self.number(id) else {
            named[id] = count
            return
        }
        let key = number / Self.blockSize
        if open?.key != key {
            if let open { blocks[open.key] = open.block }
            if let block = blocks.removeValue(forKey: key) {
                open = (key, block)
            } else {
                open = (key, Block())
                blockOrder.append(key)
            }
        }
        open!.block.counts[Int(number % Self.blockSize)] = count
        open!.block.highestCount = max(open!.block.highestCount, count)
    }

    /// The latest count recorded for `id`, which may belong to an event the history no longer holds.
    func count(of id: String) -> UInt64? {
        guard let number = Self.number(id) else { return named[id] }
        let key = number / Self.blockSize
        let block = open?.key == key ? open?.block : blocks[key]
        let count = block?.counts[Int(number % Self.blockSize)] ?? 0
        return count == 0 ? nil : count
    }

    /// Forgets what counts only events before `oldestHeld`; `evicted` is the id of an event that just left.
    mutating func dropCounts(before oldestHeld: UInt64, evicted: String) {
        // Journal ids never enter `named`: no parse of each evicted id while it is empty, the usual case.
        if !named.isEmpty, Self.number(evicted) == nil, named[evicted].map({ $0 < oldestHeld }) == true {
            named[evicted] = nil
        }
        // Looked at once every 64 events that leave: a block is a hash lookup.
        guard oldestHeld % Self.blockSize == 0 else { return }
        while let key = blockOrder.first {
            let block = open?.key == key ? open?.block : blocks[key]
            guard let block, block.highestCount < oldestHeld else { break }
            blockOrder.removeFirst()
            if open?.key == key { open = nil } else { blocks[key] = nil }
        }
    }

    mutating func removeAll() {
        self = EventIndex()
    }

    /// The value of an id written as a number without leading zeros, the way journal ids are; nil for any other id.
    private static func number(_ id: String) -> UInt64? {
        let utf8 = id.utf8
        guard let first = utf8.first, first != UInt8(ascii: "0") || utf8.count == 1 else { return nil }
        return UInt64(id)
    }
}

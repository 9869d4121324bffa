import DequeModule
import Herald
import HeraldPostgres
import HeraldRealtime
import Synchronization

/// Each event's `postgres_changes` data, rendered once however many channels
/// carry it. Keeps the most recent `capacity` events, and no more than
/// `byteCapacity` of their data past the newest: the channels that carry an
/// event render it within moments of each other, and a count alone kept
/// 8,192 rows of 1 MB (3.3 GB after one user's channels had left).
final class ChangeDataCache: Sendable {
    private struct State {
        var data: [String: [UInt8]] = [:]
        var order: Deque<String> = []
        var bytes = 0
    }

    private let catalog: SchemaCatalog
    private let capacity: Int
    private let byteCapacity: Int
    private let state = Mutex(State())

    init(catalog: SchemaCatalog, capacity: Int = 8192, byteCapacity: Int = 32 << 20) {
        self.catalog = catalog
        self.capacity = capacity
        self.byteCapacity = byteCapacity
    }

    /// The bytes of data held now.
    var heldBytes: Int { state.withLock { $0.bytes } }

    /// - Parameter cohort: the row-security cohort the event was restricted
    ///   for: its rows and columns are that cohort's, so it is cached apart,
    ///   and its `columns` list only the columns it carries.
    func data(for event: Event, cohort: UInt64? = nil) async -> [UInt8] {
        let key = cohort.map { "\($0)/\(event.id)" } ?? event.id
        if let cached = state.withLock({ $0.data[key] }) { return cached }
        var columns = await columns(of: event)
        if cohort != nil {
            let carried = Set((event.new ?? event.old)?.keys ?? [])
            columns.removeAll { !carried.contains($0.name) }
        }
        let data = ChangePayload.data(event, columns: columns)
        state.withLock { state in
            guard state.data.updateValue(data, forKey: key) == nil else { return }
            state.order.append(key)
            state.bytes += data.count
            while state.order.count > capacity || (state.bytes > byteCapacity && state.order.count > 1), let oldest = state.order.popFirst() {
                state.bytes -= state.data.removeValue(forKey: oldest)?.count ?? 0
            }
        }
        return data
    }

    /// The table's columns; a column in the row that the catalog lacks (added
    /// since) refreshes it. Without the catalog, the row's own keys, typed `unknown`.
    private func columns(of event: Event) async -> [RealtimeColumn] {
        let names = (event.new ?? event.old)?.keys ?? []
        guard let columns = try? await catalog.columns(of: event.table, expecting: names) else {
            return names.map { RealtimeColumn(name: $0, type: "unknown") }
        }
        return columns.map { RealtimeColumn(name: $0.name, type: $0.type.name) }
    }
}

import Herald

extension RowSecurityGate {
    /// What each cohort may see of a batch, and the cohorts whose check failed.
    struct Judgement: Sendable {
        var visible: [(RowSecurityCohort, [Event])] = []
        var failures: [(RowSecurityCohort, String)] = []
        /// How long each judged cohort's part of the script took, and the images it judged, by serial.
        var costs: [UInt64: (time: Duration, images: Int)] = [:]
        /// Cohorts whose check ran past the shared script's limit, by serial: not judged; their batch waits to be judged alone.
        var overran: Set<UInt64> = []
    }

    /// Judges `events` for `cohorts`: one catalog read, then one round trip
    /// (more only after a cohort's statement fails: the rest run again).
    /// - Parameters:
    ///   - followingAll: judge every table, not only those the cohorts' subscribers follow.
    ///   - cohortTimeout: for a script that cohorts share, how long each cohort's checks may run (``RowVisibilityScript``).
    ///   - serial: the live checks' connection, or the replays'.
    /// - Throws: ``LibpqError`` when the database cannot be asked at all.
    func judge(
        _ events: [Event], for cohorts: [RowSecurityCohort], followingAll: Bool = false, cohortTimeout: CheckBudget? = nil,
        on serial: SerialConnection
    ) async throws -> Judgement {
        let tables = Set(events.lazy.filter { $0.operation != .broadcast }.map(\.table))
        let following = cohorts.map { cohort in
            followingAll ? tables : tables.filter { cohort.broker.hasSubscribers(following: $0) }
        }
        let identities = cohorts.map(\.identity)
        let started = ContinuousClock.now
        let (access, verdicts, failures, checks, costs) = try await serial.run { connection throws(LibpqError) in
            try Self.judge(events, identities: identities, following: following, cohortTimeout: cohortTimeout, on: connection)
        }
        statistics.withLock { statistics in
            statistics.batches += 1
            statistics.checks += UInt64(checks)
            statistics.checkSeconds += (ContinuousClock.now - started) / .seconds(1)
            statistics.failures += UInt64(failures.values.filter { if case .failed = $0 { true } else { false } }.count)
        }
        var judgement = Judgement()
        for (index, cohort) in cohorts.enumerated() {
            if let cost = costs[index] { judgement.costs[cohort.serial] = cost }
            // What nobody of the cohort followed was not judged for it: its history lacks those events.
            let missed = tables.subtracting(following[index])
            if !missed.isEmpty { cohort.missed(missed) }
            switch failures[index] {
            case .overran?:
                judgement.overran.insert(cohort.serial)
                continue
            case .failed(let reason)?:
                judgement.failures.append((cohort, reason))
                continue
            case nil:
                break
            }
            judgement.visible.append((cohort, Self.restrict(
                events, for: cohort.identity, following: following[index], access: access, visible: verdicts[index] ?? [:]
            )))
        }
        return judgement
    }

    /// The events as one cohort sees them.
    private static func restrict(
        _ events: [Event], for identity: RowSecurityIdentity, following: Set<TableName>,
        access: [RowSecurityCatalog.Key: TableAccess], visible: [Int: RowVisibility]
    ) -> [Event] {
        var seen: [Event] = []
        for (index, event) in events.enumerated() {
            if event.operation == .broadcast {
                seen.append(event)
                continue
            }
            guard following.contains(event.table) else { continue }
            let table = access[.init(role: identity.role, table: event.table)] ?? .none
            guard table.isSelectable else { continue }
            let visibility: RowVisibility
            switch table.condition {
            case .everyRow: visibility = RowVisibility(new: true, old: true)
            case .noRow: continue
            case .expression: visibility = visible[index] ?? RowVisibility(new: false, old: false)
            }
            if event.operation == .truncate {
                // Emptying the table empties the rows the subscriber could see; it shows no row.
                seen.append(event)
            } else if let restricted = event.restricted(to: visibility, columns: table.columns) {
                seen.append(restricted)
            }
        }
        return seen
    }

    /// Why a cohort of a script has no verdict.
    private enum CohortFailure {
        /// Its check ran past the shared script's limit: it is judged again, alone.
        case overran
        /// A statement of its part failed: its streams end with the reason.
        case failed(String)
    }

    /// On the gate's connection: the catalog, the visibility of each
    /// event's images per cohort (by event index), each failed cohort's
    /// reason, the number of policy statements run, and each judged
    /// cohort's time in the script.
    private static func judge(
        _ events: [Event], identities: [RowSecurityIdentity], following: [Set<TableName>], cohortTimeout: CheckBudget?, on connection: LibpqConnection
    ) throws(LibpqError) -> ([RowSecurityCatalog.Key: TableAccess], [Int: [Int: RowVisibility]], [Int: CohortFailure], Int, [Int: (time: Duration, images: Int)]) {
        let roles = Set(identities.indices.filter { !following[$0].isEmpty }.map { identities[$0].role })
        let allTables = following.reduce(into: Set<TableName>()) { $0.formUnion($1) }
        guard !roles.isEmpty else { return ([:], [:], [:], 0, [:]) }
        let access = try RowSecurityCatalog.read(roles: roles, tables: allTables, on: connection)

        var parts: [RowVisibilityScript.Cohort] = []
        for (index, identity) in identities.enumerated() {
            let conditions = following[index].sorted().compactMap { table -> (table: TableName, condition: String)? in
                guard let entry = access[.init(role: identity.role, table: table)], entry.isSelectable,
                      case .expression(let condition) = entry.condition else { return nil }
                return (table, condition)
            }
            if !conditions.isEmpty { parts.append(.init(index: index, identity: identity, conditions: conditions)) }
        }
        guard !parts.isEmpty else { return (access, [:], [:], 0, [:]) }

        // Each event's new and old image, once, for every cohort that judges its table.
        let judged = Set(parts.flatMap { $0.conditions.map(\.table) })
        var images: [TableName: [RawJSON]] = [:]
        var positions: [Int: (new: Int?, old: Int?)] = [:]
        for (index, event) in events.enumerated() where judged.contains(event.table) && !event.rowDataOmitted {
            func add(_ image: RawJSON?) -> Int? {
                guard let image else { return nil }
                images[event.table, default: []].append(image)
                return images[event.table]!.count
            }
            positions[index] = (add(event.newJSON), add(event.oldJSON))
        }

        var passing: [Int: [TableName: Set<Int>]] = [:]
        var failures: [Int: CohortFailure] = [:]
        var checks = 0
        var costs: [Int: (time: Duration, images: Int)] = [:]
        let imagesJudged = Dictionary(uniqueKeysWithValues: parts.map { ($0.index, $0.images(in: images)) })
        var remaining = parts[...]
        while !remaining.isEmpty {
            let script = try RowVisibilityScript(
                images: images, cohorts: Array(remaining), cohortTimeout: cohortTimeout, quote: connection.escapeLiteral, quoteIdentifier: connection.escapeIdentifier
            ) { table, condition throws(LibpqError) in
                let sql = RowVisibilityScript.check(
                    type: try connection.escapeIdentifier(table.schema) + "." + connection.escapeIdentifier(table.name),
                    alias: try connection.escapeIdentifier(table.name), setting: RowVisibilityScript.setting(for: table), condition: condition
                )
                let name = RowVisibilityScript.statementName(for: sql)
                do throws(LibpqError) {
                    try connection.prepareOnce(name, sql)
                    return "EXECUTE \(name)"
                } catch where error.code == .queryFailed {
                    // Unpreparable as pgherald's own role: run as the cohort's, which fails or succeeds for that cohort alone.
                    return sql
                } catch {
                    throw error
                }
            }
            let (results, error) = try connection.executeScript(script.sql)
            var clock: Int64?
            for (position, result) in results.enumerated() {
                switch script.statements[position] {
                case .check(let cohort, let table):
                    passing[cohort, default: [:]][table] = RowVisibilityScript.positions(result)
                    checks += 1
                case .clock(let cohort):
                    let now = RowVisibilityScript.microseconds(result)
                    if let cohort, let now, let clock { costs[cohort] = (.microseconds(now - clock), imagesJudged[cohort] ?? 0) }
                    clock = now
                case .setup, .cohort:
                    break
                }
            }
            guard let error else { break }
            try connection.execute("ROLLBACK")
            let failed = results.count < script.statements.count ? script.statements[results.count] : .setup
            let cohort: Int
            switch failed {
            case .cohort(let index), .check(let index, _): cohort = index
            case .setup, .clock: throw error
            }
            let overran = cohortTimeout != nil && error.sqlState == RowVisibilityScript.timedOut
            failures[cohort] = overran ? .overran : .failed(error.message)
            remaining = remaining.drop { $0.index != cohort }.dropFirst()
        }

        var verdicts: [Int: [Int: RowVisibility]] = [:]
        for (cohort, tables) in passing {
            var visible: [Int: RowVisibility] = [:]
            for (index, position) in positions {
                guard let passed = tables[events[index].table] else { continue }
                visible[index] = RowVisibility(
                    new: position.new.map(passed.contains) ?? false, old: position.old.map(passed.contains) ?? false
                )
            }
            verdicts[cohort] = visible
        }
        return (access, verdicts, failures, checks, costs)
    }
}

import Herald

/// The sets of parameter values each caller follows of each live query: each set is an evaluation
/// of its own on every change, so one caller's many sets would delay everyone's results.
struct ParameterSetLedger: Sendable {
    struct Holder: Hashable {
        var caller: String
        var query: String
    }

    /// Open streams by holder and set of values.
    private(set) var open: [Holder: [[String]: Int]] = [:]

    /// Counts a stream of `caller` on `values` of `definition`; why not, naming the limit, when
    /// it would be one set too many.
    mutating func open(_ values: [String], of definition: LiveQueryDefinition, by caller: String, shared: Bool) -> String? {
        let holder = Holder(caller: caller, query: definition.name)
        let sets = open[holder, default: [:]]
        let limit = shared ? definition.parameterSetsPerKey : definition.parameterSetsPerUser
        if sets[values] == nil, sets.count >= limit {
            return "\(caller) follows \(sets.count) sets of parameters of query \(definition.name), its limit "
                + "(queries.\(definition.name).max_parameter_sets_per_\(shared ? "key" : "user")); end one first"
        }
        open[holder, default: [:]][values, default: 0] += 1
        return nil
    }

    mutating func close(_ values: [String], of query: String, by caller: String) {
        let holder = Holder(caller: caller, query: query)
        guard let count = open[holder]?[values] else { return }
        open[holder]?[values] = count > 1 ? count - 1 : nil
        if open[holder]?.isEmpty == true { open[holder] = nil }
    }
}

/// A named query whose result pgherald keeps current for its subscribers
/// (`queries.NAME` in the configuration).
public struct LiveQueryDefinition: Sendable, Hashable {
    /// Letters, digits, `-` and `_`: it appears in `/queries/NAME` and in access rules.
    public var name: String
    /// One SELECT; parameter `n` of ``parameters`` is `$n` in it.
    public var sql: String
    /// The result columns that identify a row: differences are computed by them.
    public var key: [String]
    /// The parameters' names, in `$1`, `$2`… order: subscribers give them as `?NAME=VALUE`.
    public var parameters: [String]
    /// The tables whose changes make it run again; nil: the tables its plan reads.
    public var tables: [TableName]?
    /// Key `as: subscriber`: it runs with each subscriber's row-level-security
    /// role and claims, once per cohort and parameters, so the policies
    /// decide its rows and it needs no table-wide grant. False (`as:
    /// daemon`, the default): it runs as pgherald's own role, once for everyone.
    public var runsAsSubscriber: Bool
    /// Key `max_parameter_sets_per_user`: the distinct sets of parameter values one user (a
    /// token's `sub`, or a socket peer) may follow at once; each is an evaluation of its own on
    /// every change of its tables. Default 16.
    public var parameterSetsPerUser: Int
    /// Key `max_parameter_sets_per_key`: the same for one shared key, or a token without `sub`,
    /// whose holders are many. Default 1,000.
    public var parameterSetsPerKey: Int

    public init(
        name: String, sql: String, key: [String], parameters: [String] = [], tables: [TableName]? = nil, runsAsSubscriber: Bool = false,
        parameterSetsPerUser: Int = 16, parameterSetsPerKey: Int = 1_000
    ) {
        self.parameterSetsPerUser = parameterSetsPerUser
        self.parameterSetsPerKey = parameterSetsPerKey
        self.name = name
        self.sql = sql
        self.key = key
        self.parameters = parameters
        self.tables = tables
        self.runsAsSubscriber = runsAsSubscriber
    }

    /// Whether `name` can name a query.
    public static func isValidName(_ name: String) -> Bool {
        !name.isEmpty && name.count <= 63 && name.allSatisfy { $0.isASCII && ($0.isLetter || $0.isNumber || $0 == "-" || $0 == "_") }
    }

    /// The values of ``parameters`` in `$n` order, from a subscriber's named values.
    /// - Throws: a parameter missing, or a name the query does not declare.
    public func boundValues(_ named: [String: String]) throws(LiveQueryError) -> [String] {
        if let unknown = named.keys.sorted().first(where: { !parameters.contains($0) }) {
            let known = parameters.isEmpty ? "it takes none" : "it takes \(parameters.joined(separator: ", "))"
            throw LiveQueryError(.badParameters, "query \(name) has no parameter \(unknown): \(known)")
        }
        return try parameters.map { (parameter) throws(LiveQueryError) -> String in
            guard let value = named[parameter] else {
                throw LiveQueryError(.badParameters, "query \(name) needs the parameter \(parameter) (?\(parameter)=VALUE)")
            }
            // libpq sends a value as a C string: a NUL would end it early, and PostgreSQL's text holds none.
            guard !value.utf8.contains(0) else {
                throw LiveQueryError(.badParameters, "query \(name)'s parameter \(parameter) holds a NUL character, which PostgreSQL's text cannot")
            }
            return value
        }
    }
}

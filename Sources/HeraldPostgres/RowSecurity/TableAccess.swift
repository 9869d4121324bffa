import Herald

/// What one role may select of one table, as the catalog says now: the
/// privileges, whether row-level security applies to it, and the SELECT
/// policies that do.
public struct TableAccess: Sendable, Hashable {
    /// USAGE on the schema, and SELECT on the table or on some of its columns.
    public var isSelectable: Bool
    /// The columns it may select; nil when it may select them all.
    public var columns: Set<String>?
    /// Whether its rows pass through policies: the table has row-level
    /// security on, and the role neither bypasses it nor owns the table
    /// (unless security is forced on the owner).
    public var checksPolicies: Bool
    /// The USING expressions of the permissive SELECT (or ALL) policies that
    /// apply to the role, as `pg_get_expr` gives them; one must hold.
    public var permissive: [String]
    /// The same of the restrictive ones; all must hold.
    public var restrictive: [String]

    public init(isSelectable: Bool, columns: Set<String>?, checksPolicies: Bool, permissive: [String] = [], restrictive: [String] = []) {
        self.isSelectable = isSelectable
        self.columns = columns
        self.checksPolicies = checksPolicies
        self.permissive = permissive
        self.restrictive = restrictive
    }

    /// Nothing of the table can be seen.
    public static let none = TableAccess(isSelectable: false, columns: [], checksPolicies: false)

    /// What a row must satisfy to be seen.
    public enum RowCondition: Sendable, Hashable {
        case everyRow
        /// Row-level security applies and no permissive policy does: PostgreSQL denies by default.
        case noRow
        /// Any permissive policy's expression and every restrictive one's.
        case expression(String)
    }

    public var condition: RowCondition {
        guard checksPolicies else { return .everyRow }
        guard !permissive.isEmpty else { return .noRow }
        let anyPermissive = permissive.map { "(\($0))" }.joined(separator: " OR ")
        return .expression(([anyPermissive] + restrictive.map { "(\($0))" }).map { "(\($0))" }.joined(separator: " AND "))
    }
}

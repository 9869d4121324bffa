import Foundation

/// A column's PostgreSQL type, as far as checking filter values needs it.
///
/// Events carry rows as JSON: integers and decimals as numbers, booleans as
/// `true`/`false`, everything else as text. A filter value that the column
/// could never hold matches nothing, so it is refused when subscribing.
public struct ColumnType: Sendable, Hashable, CustomStringConvertible {
    /// `typname`: int4, numeric, bool, uuid, text, …
    public var name: String

    public init(name: String) {
        self.name = name
    }

    public var description: String { name }

    /// Why `text` can never equal or order against a value of this type, or nil if it can.
    public func problem(with text: String) -> String? {
        switch name {
        case "int2", "int4", "int8", "oid":
            let bits = ["int2": 16, "int4": 32, "int8": 64, "oid": 33][name]!
            guard let value = Int64(text), value.magnitude <= (UInt64(1) << (bits - 1)) else { return "not a whole number that fits \(name)" }
            return nil
        case "float4", "float8", "numeric":
            return Double(text) != nil || ["NaN", "Infinity", "-Infinity"].contains(text) ? nil : "not a number"
        case "bool":
            return text == "true" || text == "false" ? nil : "not true or false"
        case "uuid":
            return UUID(uuidString: text) != nil && text == text.lowercased() ? nil : "not a lowercase UUID (as PostgreSQL writes them)"
        default:
            return nil
        }
    }

    /// Whether `is.true` or `is.false` can ever hold: only booleans are JSON true or false.
    public var holdsBooleans: Bool { name == "bool" }
}

public import Foundation

/// Decodes a row's JSON into an app's own `Decodable` type, as the seed app
/// decodes Supabase rows into its `Course` and `Student` structs.
///
/// Column names in snake_case fill camelCase properties; `numeric` decodes
/// to `Decimal` digit for digit and `bigint` to `Int64`; `date`, `timestamp`
/// and `timestamptz` decode to `Date` (``PostgresTimestamp``); `uuid` to
/// `UUID`; `json` and `jsonb` to nested `Decodable` types; null to optionals.
public struct RowDecoder: Sendable {
    /// Default: `.convertFromSnakeCase`.
    public var keyDecodingStrategy: JSONDecoder.KeyDecodingStrategy

    public init(keyDecodingStrategy: JSONDecoder.KeyDecodingStrategy = .convertFromSnakeCase) {
        self.keyDecodingStrategy = keyDecodingStrategy
    }

    public func decode<Row: Decodable>(_ type: Row.Type, from row: RawJSON) throws -> Row {
        let decoder = JSONDecoder()
        decoder.keyDecodingStrategy = keyDecodingStrategy
        decoder.dateDecodingStrategy = .custom { decoder in
            let text = try decoder.singleValueContainer().decode(String.self)
            guard let date = PostgresTimestamp.parse(text) else {
                throw DecodingError.dataCorrupted(.init(
                    codingPath: decoder.codingPath, debugDescription: "'\(text.prefix(40))' is not a PostgreSQL date or timestamp"
                ))
            }
            return date
        }
        return try decoder.decode(Row.self, from: Data(row.bytes))
    }
}

extension Event {
    /// The row after the change (INSERT, UPDATE) as `Row`; nil for DELETE and TRUNCATE,
    /// and when the row was too large for a notification (``rowDataOmitted``).
    public func new<Row: Decodable>(as type: Row.Type, decoder: RowDecoder = RowDecoder()) throws -> Row? {
        try newJSON.map { try decoder.decode(type, from: $0) }
    }

    /// The row before the change (UPDATE, DELETE) as `Row`.
    public func old<Row: Decodable>(as type: Row.Type, decoder: RowDecoder = RowDecoder()) throws -> Row? {
        try oldJSON.map { try decoder.decode(type, from: $0) }
    }
}

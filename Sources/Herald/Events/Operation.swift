/// The kind of change an event reports.
public enum Operation: String, Sendable, Hashable, CaseIterable, CustomStringConvertible {
    case insert = "INSERT"
    case update = "UPDATE"
    case delete = "DELETE"
    case truncate = "TRUNCATE"
    /// A message sent with `pgherald.send` in a transaction: its table is
    /// `realtime.TOPIC`, its new row the event name, payload and privacy.
    /// Not a row change: ``OperationSet/all`` leaves it out, so only those
    /// who ask for topics receive it.
    case broadcast = "BROADCAST"

    public var description: String { rawValue }

    /// Parses an operation name, case-insensitively.
    public init?(name: some StringProtocol) {
        self.init(rawValue: name.uppercased())
    }
}

/// A set of operations, stored as a bit mask so filter checks cost one AND.
public struct OperationSet: OptionSet, Sendable, Hashable {
    public let rawValue: UInt8

    public init(rawValue: UInt8) { self.rawValue = rawValue }

    public init(_ operation: Operation) {
        switch operation {
        case .insert: self = .insert
        case .update: self = .update
        case .delete: self = .delete
        case .truncate: self = .truncate
        case .broadcast: self = .broadcast
        }
    }

    public static let insert = OperationSet(rawValue: 1 << 0)
    public static let update = OperationSet(rawValue: 1 << 1)
    public static let delete = OperationSet(rawValue: 1 << 2)
    public static let truncate = OperationSet(rawValue: 1 << 3)
    public static let broadcast = OperationSet(rawValue: 1 << 4)
    /// Every row change; broadcasts are not among them.
    public static let all: OperationSet = [.insert, .update, .delete, .truncate]

    public func contains(_ operation: Operation) -> Bool {
        contains(OperationSet(operation))
    }
}

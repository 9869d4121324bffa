/// A schema or table name in an access rule: written literally, or with `*`
/// standing for any run of characters (`tenant_*`, `*`). A name in double
/// quotes is literal, so a real `*` can be granted too.
public struct NamePattern: Sendable, Hashable, CustomStringConvertible {
    /// The literal runs between the stars; one run means no star.
    private let parts: [String]

    /// Every name.
    public static let any = NamePattern(parts: ["", ""])

    private init(parts: [String]) {
        self.parts = parts
    }

    /// - Parameter literal: the name was quoted, so `*` is itself.
    public init(_ text: String, literal: Bool) {
        parts = literal ? [text] : text.split(separator: "*", omittingEmptySubsequences: false).map(String.init)
    }

    public var isLiteral: Bool { parts.count == 1 }

    public func matches(_ name: String) -> Bool {
        guard parts.count > 1 else { return name == parts[0] }
        guard let first = parts.first, let last = parts.last, name.hasPrefix(first) else { return false }
        var rest = Substring(name).dropFirst(first.count)
        guard rest.count >= last.count, rest.hasSuffix(last) else { return false }
        rest = rest.dropLast(last.count)
        // Each middle run as early as it can be: a star takes as little as it must.
        for middle in parts.dropFirst().dropLast() where !middle.isEmpty {
            guard let found = rest.firstRange(of: middle) else { return false }
            rest = rest[found.upperBound...]
        }
        return true
    }

    public var description: String { parts.joined(separator: "*") }
}

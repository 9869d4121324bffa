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

    /// Compares UTF-8 bytes, not characters: it runs for every event a
    /// narrowed stream looks at, and names are matched byte for byte anyway.
    public func matches(_ name: String) -> Bool {
        guard parts.count > 1 else { return name == parts[0] }
        var bytes = Substring(name).utf8[...]
        let first = parts[0].utf8, last = parts[parts.count - 1].utf8
        guard bytes.count >= first.count + last.count, bytes.starts(with: first), bytes.reversed().starts(with: last.reversed()) else {
            return false
        }
        bytes = bytes.dropFirst(first.count).dropLast(last.count)
        // Each middle run as early as it can be: a star takes as little as it must.
        for middle in parts.dropFirst().dropLast() where !middle.isEmpty {
            guard let found = Self.firstRange(of: middle.utf8, in: bytes) else { return false }
            bytes = bytes[found...]
        }
        return true
    }

    /// The index just past the first occurrence of `needle` in `haystack`.
    private static func firstRange(of needle: String.UTF8View, in haystack: Substring.UTF8View.SubSequence) -> Substring.UTF8View.Index? {
        var start = haystack.startIndex
        while haystack.distance(from: start, to: haystack.endIndex) >= needle.count {
            if haystack[start...].starts(with: needle) { return haystack.index(start, offsetBy: needle.count) }
            start = haystack.index(after: start)
        }
        return nil
    }

    public var description: String { parts.joined(separator: "*") }
}

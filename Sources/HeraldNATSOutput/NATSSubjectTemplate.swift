public import Herald

/// The subject an event is published on: a template such as
/// `pgherald.{schema}.{table}.{op}`, filled in per event.
///
/// Names are made subject-safe reversibly: every byte of a name's UTF-8
/// other than `A`–`Z`, `a`–`z`, `0`–`9`, `_` and `-` becomes `%` and two
/// upper-case hex digits, so `public.my table` fills `{table}` with
/// `my%20table`, a `.` is `%2E` and `%` itself is `%25`.
public struct NATSSubjectTemplate: Sendable, Equatable, CustomStringConvertible {
    enum Part: Sendable, Equatable {
        case literal(String)
        case schema
        case table
        case operation
    }

    let parts: [Part]
    public let description: String

    /// - Throws: a reason, when the template cannot form a subject.
    public init(_ text: String) throws(NATSSubjectError) {
        var parts: [Part] = []
        var rest = Substring(text)
        while let open = rest.firstIndex(of: "{") {
            if open > rest.startIndex { parts.append(.literal(String(rest[..<open]))) }
            guard let close = rest[open...].firstIndex(of: "}") else { throw NATSSubjectError("'{' without '}' in \(text)") }
            switch rest[rest.index(after: open)..<close] {
            case "schema": parts.append(.schema)
            case "table": parts.append(.table)
            case "op": parts.append(.operation)
            case let other: throw NATSSubjectError("{\(other)} is not a placeholder; use {schema}, {table} or {op}")
            }
            rest = rest[rest.index(after: close)...]
        }
        if !rest.isEmpty { parts.append(.literal(String(rest))) }
        for case .literal(let literal) in parts {
            if let bad = literal.first(where: { !$0.isASCII || $0 == " " || $0 == "*" || $0 == ">" || $0 == "}" || $0.asciiValue.map { $0 < 0x21 || $0 > 0x7E } == true }) {
                throw NATSSubjectError("'\(bad)' cannot stand in a subject (\(text)): subjects are printable ASCII without spaces, * or >")
            }
        }
        self.parts = parts
        description = text
        // Every token must be non-empty; placeholders always fill theirs.
        let sample = subject(schema: "s", table: "t", operation: "INSERT")
        guard !sample.isEmpty, !sample.split(separator: ".", omittingEmptySubsequences: false).contains(where: \.isEmpty) else {
            throw NATSSubjectError("\(text) has an empty token: a subject is tokens joined by single dots")
        }
    }

    /// The subject of `event`.
    public func subject(for event: Event) -> String {
        subject(schema: event.table.schema, table: event.table.name, operation: event.operation.rawValue)
    }

    func subject(schema: String, table: String, operation: String) -> String {
        parts.map { part in
            switch part {
            case .literal(let text): text
            case .schema: Self.escape(schema)
            case .table: Self.escape(table)
            case .operation: Self.escape(operation)
            }
        }.joined()
    }

    /// The subjects a stream takes to hold every event: each token with a placeholder becomes `*`.
    public var wildcard: String {
        let marked = subject(schema: "\u{1}", table: "\u{1}", operation: "\u{1}")
        return marked.split(separator: ".", omittingEmptySubsequences: false)
            .map { $0.contains("%01") ? "*" : String($0) }.joined(separator: ".")
    }

    /// Whether a stream taking ``wildcard`` would also take `subject`.
    public func captures(_ subject: String) -> Bool {
        let pattern = wildcard.split(separator: ".", omittingEmptySubsequences: false)
        let tokens = subject.split(separator: ".", omittingEmptySubsequences: false)
        guard pattern.count == tokens.count else { return false }
        return zip(pattern, tokens).allSatisfy { $0 == "*" || $0 == $1 }
    }

    /// `name` as it stands in a subject token.
    public static func escape(_ name: String) -> String {
        var escaped = ""
        for byte in name.utf8 {
            switch byte {
            case UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "0")...UInt8(ascii: "9"),
                 UInt8(ascii: "_"), UInt8(ascii: "-"):
                escaped.unicodeScalars.append(UnicodeScalar(byte))
            default:
                escaped += "%" + String(byte, radix: 16, uppercase: true).leftPadded(to: 2)
            }
        }
        return escaped
    }

    /// The name a token stands for; nil when it is not one ``escape(_:)`` makes.
    public static func unescape(_ token: String) -> String? {
        var bytes: [UInt8] = []
        var index = token.utf8.startIndex
        let utf8 = token.utf8
        while index < utf8.endIndex {
            let byte = utf8[index]
            if byte == UInt8(ascii: "%") {
                let high = utf8.index(after: index)
                guard high < utf8.endIndex, utf8.index(after: high) < utf8.endIndex,
                      let value = UInt8(String(decoding: utf8[high...utf8.index(after: high)], as: UTF8.self), radix: 16) else { return nil }
                bytes.append(value)
                index = utf8.index(high, offsetBy: 2)
            } else {
                bytes.append(byte)
                index = utf8.index(after: index)
            }
        }
        return String(validating: bytes, as: UTF8.self)
    }
}

/// Why a subject template cannot form subjects.
public struct NATSSubjectError: Error, Sendable, Equatable, CustomStringConvertible {
    public var description: String

    init(_ description: String) {
        self.description = description
    }
}

extension String {
    fileprivate func leftPadded(to width: Int) -> String {
        count >= width ? self : String(repeating: "0", count: width - count) + self
    }
}

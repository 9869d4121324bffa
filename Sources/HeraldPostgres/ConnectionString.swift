import CLibPQ

/// A libpq connection string (`key=value` conninfo or `postgresql://` URI).
///
/// libpq does the parsing, and fills in anything missing from the `PG*`
/// environment variables, `.pgpass` and service files when connecting.
/// The raw text is never printed: `description` is a redacted summary.
public struct ConnectionString: Sendable, CustomStringConvertible {
    /// The text as given; pass only to libpq.
    let rawValue: String
    /// The password in the text, if any.
    private let password: String?
    /// A password given apart from the text (read from a file); it overrides the text's.
    let separatePassword: String?
    public let description: String

    /// Validates `text` with libpq, without connecting.
    ///
    /// An empty string means "libpq defaults": everything from `PG*` variables.
    /// - Parameter password: a password kept out of the text (from a file or a
    ///   systemd credential); it overrides one in the text.
    public init(_ text: String, password separatePassword: String? = nil) throws(LibpqError) {
        self.separatePassword = separatePassword
        var errorPointer: UnsafeMutablePointer<CChar>?
        guard let options = PQconninfoParse(text, &errorPointer) else {
            let detail = errorPointer.map { String(cString: $0) } ?? "out of memory"
            errorPointer.map { PQfreemem($0) }
            throw LibpqError(
                .invalidConnectionString,
                "invalid connection string: \(Self.maskingQuotedText(in: LibpqError.oneLine(detail)))"
            )
        }
        defer { PQconninfoFree(options) }
        let given = Self.values(of: options)
        let defaults = PQconndefaults().map { pointer in
            defer { PQconninfoFree(pointer) }
            return Self.values(of: pointer)
        } ?? [:]
        rawValue = text
        password = given["password"]
        description = ["host", "hostaddr", "port", "dbname", "user"]
            .compactMap { key in (given[key] ?? defaults[key]).map { "\(key)=\($0)" } }
            .joined(separator: " ")
    }

    /// Whether the text itself holds a password (rather than `.pgpass` or `PGPASSWORD`).
    public var containsPassword: Bool { password.map { !$0.isEmpty } ?? false }

    /// Removes this connection's password from a message that might echo it.
    func redact(_ message: String) -> String {
        [password, separatePassword].reduce(message) { message, secret in
            guard let secret, !secret.isEmpty else { return message }
            return message.replacing(secret, with: "***")
        }
    }

    private static func values(of options: UnsafeMutablePointer<PQconninfoOption>) -> [String: String] {
        var values: [String: String] = [:]
        var option = options
        while let keyword = option.pointee.keyword {
            if let value = option.pointee.val, value.pointee != 0 {
                values[String(cString: keyword)] = String(cString: value)
            }
            option += 1
        }
        return values
    }

    /// libpq quotes the offending fragment of a bad conninfo, which may be a
    /// password; keep the message and single-character quotes such as `"="`,
    /// but not longer fragments. An unknown option's name is kept when it
    /// looks like one (lowercase letters and underscores), so the user sees
    /// which option is wrong.
    static func maskingQuotedText(in message: String) -> String {
        let parts = message.split(separator: "\"", omittingEmptySubsequences: false)
        return parts.enumerated()
            .map { index, part in
                guard index % 2 == 1, part.count > 1 else { return String(part) }
                let namesAnOption = parts[index - 1].hasSuffix("invalid connection option ")
                    || parts[index - 1].hasSuffix("invalid URI query parameter: ")
                let looksLikeAName = part.count <= 40 && part.allSatisfy { $0 == "_" || ("a"..."z").contains($0) }
                return namesAnOption && looksLikeAName ? String(part) : "…"
            }
            .joined(separator: "\"")
    }
}

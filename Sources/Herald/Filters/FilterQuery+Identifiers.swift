extension FilterQuery {
    /// Splits `text` at `separator` where it stands outside double quotes, so
    /// `"a,b",c` is two items. Quotes stay on the parts; an unterminated quote
    /// returns nil. After `maxSplits` splits the rest is one part, read as
    /// it is. Reads Unicode scalars, not characters: a combining mark after a
    /// separator must not hide it.
    static func split(_ text: Substring, at separator: Unicode.Scalar, maxSplits: Int = .max) -> [Substring]? {
        let scalars = text.unicodeScalars
        var parts: [Substring] = []
        var start = scalars.startIndex
        var inQuotes = false
        var index = scalars.startIndex
        while index < scalars.endIndex, parts.count < maxSplits {
            let scalar = scalars[index]
            if scalar == "\"" {
                inQuotes.toggle()
            } else if scalar == separator, !inQuotes {
                parts.append(Substring(scalars[start..<index]))
                start = scalars.index(after: index)
            }
            index = scalars.index(after: index)
        }
        guard !inQuotes else { return nil }
        parts.append(Substring(scalars[start...]))
        return parts
    }

    /// A name as written: `"Weird Table"` (quoted, `""` standing for a quote)
    /// or taken literally. Nil for a quote in the wrong place.
    static func identifier(_ text: Substring) -> String? {
        let scalars = text.unicodeScalars
        guard scalars.first == "\"" else { return scalars.contains("\"") ? nil : String(text) }
        guard scalars.count >= 2, scalars.last == "\"" else { return nil }
        var name = String.UnicodeScalarView()
        var pendingQuote = false
        for scalar in scalars.dropFirst().dropLast() {
            if pendingQuote {
                guard scalar == "\"" else { return nil }
                pendingQuote = false
                name.append("\"")
            } else if scalar == "\"" {
                pendingQuote = true
            } else {
                name.append(scalar)
            }
        }
        return pendingQuote ? nil : String(name)
    }

    /// `name`, quoted when the query language would otherwise split it.
    static func quotedIfNeeded(_ name: String) -> String {
        guard name.isEmpty || name.unicodeScalars.contains(where: { ".,\"".unicodeScalars.contains($0) }) else { return name }
        var quoted = String.UnicodeScalarView()
        quoted.append("\"")
        for scalar in name.unicodeScalars {
            if scalar == "\"" { quoted.append("\"") }
            quoted.append(scalar)
        }
        quoted.append("\"")
        return String(quoted)
    }
}

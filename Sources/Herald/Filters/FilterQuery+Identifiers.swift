extension FilterQuery {
    /// Splits `text` at `separator` where it stands outside double quotes, so
    /// `"a,b",c` is two items. Quotes stay on the parts; an unterminated quote
    /// returns nil.
    static func split(_ text: Substring, at separator: Character, maxSplits: Int = .max) -> [Substring]? {
        var parts: [Substring] = []
        var start = text.startIndex
        var inQuotes = false
        var index = text.startIndex
        while index < text.endIndex {
            let character = text[index]
            if character == "\"" {
                inQuotes.toggle()
            } else if character == separator, !inQuotes, parts.count < maxSplits {
                parts.append(text[start..<index])
                start = text.index(after: index)
            }
            index = text.index(after: index)
        }
        guard !inQuotes else { return nil }
        parts.append(text[start...])
        return parts
    }

    /// A name as written: `"Weird Table"` (quoted, `""` standing for a quote)
    /// or taken literally. Nil for a quote in the wrong place.
    static func identifier(_ text: Substring) -> String? {
        guard text.first == "\"" else { return text.contains("\"") ? nil : String(text) }
        guard text.count >= 2, text.last == "\"" else { return nil }
        let inner = text.dropFirst().dropLast()
        var name = ""
        var pendingQuote = false
        for character in inner {
            if pendingQuote {
                guard character == "\"" else { return nil }
                pendingQuote = false
                name.append("\"")
            } else if character == "\"" {
                pendingQuote = true
            } else {
                name.append(character)
            }
        }
        return pendingQuote ? nil : name
    }

    /// `name`, quoted when the query language would otherwise split it.
    static func quotedIfNeeded(_ name: String) -> String {
        guard name.isEmpty || name.contains(where: { ".,\"".contains($0) }) else { return name }
        return "\"" + name.replacing("\"", with: "\"\"") + "\""
    }
}

/// A SQL `LIKE` pattern: `%` stands for any run of characters, `_` for one,
/// and a backslash makes the next character literal, as in PostgreSQL.
struct LikePattern {
    enum Token: Equatable {
        case literal(Unicode.Scalar)
        case anyOne
        case anyRun
    }

    let tokens: [Token]
    let ignoringCase: Bool

    init(_ pattern: String, ignoringCase: Bool) {
        var tokens: [Token] = []
        var escaping = false
        for scalar in (ignoringCase ? pattern.lowercased() : pattern).unicodeScalars {
            if escaping {
                tokens.append(.literal(scalar))
                escaping = false
                continue
            }
            switch scalar {
            case "\\": escaping = true
            case "%": if tokens.last != .anyRun { tokens.append(.anyRun) }
            case "_": tokens.append(.anyOne)
            default: tokens.append(.literal(scalar))
            }
        }
        // A trailing backslash matches itself, as PostgreSQL's does.
        if escaping { tokens.append(.literal("\\")) }
        self.tokens = tokens
        self.ignoringCase = ignoringCase
    }

    /// Strings match by their text and numbers by their digits; other JSON values never match.
    func matches(_ value: JSONValue) -> Bool {
        switch value {
        case .string(let text): matches(text)
        case .number(let number): matches(number.text)
        default: false
        }
    }

    /// Wildcard matching that backtracks only to the last `%`, so it takes
    /// time linear in the text for each `%`, never exponential.
    func matches(_ text: String) -> Bool {
        let scalars = Array((ignoringCase ? text.lowercased() : text).unicodeScalars)
        var position = 0
        var token = 0
        var lastRun: (token: Int, position: Int)?
        while position < scalars.count {
            if token < tokens.count {
                switch tokens[token] {
                case .anyRun:
                    lastRun = (token, position)
                    token += 1
                    continue
                case .anyOne:
                    token += 1
                    position += 1
                    continue
                case .literal(let scalar) where scalar == scalars[position]:
                    token += 1
                    position += 1
                    continue
                case .literal:
                    break
                }
            }
            guard let run = lastRun else { return false }
            // Let the last `%` take one more character and try again from there.
            lastRun = (run.token, run.position + 1)
            token = run.token + 1
            position = run.position + 1
        }
        return tokens[token...].allSatisfy { $0 == .anyRun }
    }
}

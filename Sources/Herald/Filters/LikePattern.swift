/// A SQL `LIKE` pattern: `%` stands for any run of characters, `_` for one,
/// and a backslash makes the next character literal, as in PostgreSQL.
///
/// Compiled once into a bit-parallel automaton (shift-and), so that a match
/// reads the text once, a few machine words a character whatever the
/// pattern: `%` followed by hundreds of `_` costs what `%x` does, where
/// backtracking cost the pattern's length for every character of the text.
struct LikePattern: Sendable, Hashable {
    enum Token: Equatable {
        case literal(Unicode.Scalar)
        case anyOne
        case anyRun
    }

    let ignoringCase: Bool
    /// State `i` has matched the first `i` characters the pattern names
    /// (every token but `%`); a word holds 64 states.
    private let words: Int
    /// The states a `%` lets stay where they are on any character.
    private let stays: [UInt64]
    /// Per literal character, the states it leads into (`i + 1` where token `i` is that character).
    private let literals: [Unicode.Scalar: [UInt64]]
    /// The same for each ASCII character, ``words`` words after words: an array read per character
    /// of text where a dictionary lookup cost a hash.
    private let asciiLiterals: [UInt64]
    /// The states that `_` leads into: any character does.
    private let anyCharacter: [UInt64]
    /// The last state's word and bit: matching all of the pattern.
    private let finalWord: Int
    private let finalBit: UInt64

    init(_ pattern: String, ignoringCase: Bool) {
        self.ignoringCase = ignoringCase
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

        let states = tokens.count(where: { $0 != .anyRun }) + 1
        let words = (states + 63) / 64
        var stays = [UInt64](repeating: 0, count: words)
        var literals: [Unicode.Scalar: [UInt64]] = [:]
        var anyCharacter = [UInt64](repeating: 0, count: words)
        var state = 0
        for token in tokens {
            let next = state + 1
            switch token {
            case .anyRun:
                stays[state / 64] |= 1 << UInt64(state % 64)
            case .anyOne:
                anyCharacter[next / 64] |= 1 << UInt64(next % 64)
                state = next
            case .literal(let scalar):
                literals[scalar, default: [UInt64](repeating: 0, count: words)][next / 64] |= 1 << UInt64(next % 64)
                state = next
            }
        }
        var asciiLiterals = [UInt64](repeating: 0, count: 128 * words)
        for (scalar, leads) in literals where scalar.isASCII {
            for word in 0..<words { asciiLiterals[Int(scalar.value) * words + word] = leads[word] }
        }
        self.words = words
        self.stays = stays
        self.literals = literals
        self.asciiLiterals = asciiLiterals
        self.anyCharacter = anyCharacter
        finalWord = state / 64
        finalBit = 1 << UInt64(state % 64)
    }

    /// Machine words a character of text costs: a pattern's length over 64.
    var wordsPerCharacter: Int { words }

    /// Strings match by their text and numbers by their digits; other JSON values never match.
    func matches(_ value: JSONValue) -> Bool {
        switch value {
        case .string(let text): matches(text)
        case .number(let number): matches(number.text)
        default: false
        }
    }

    /// Runs the automaton over the text once: each character moves every live
    /// state to the next where the pattern allows that character, and keeps
    /// those a `%` holds.
    func matches(_ text: String) -> Bool {
        var live = [UInt64](repeating: 0, count: words)
        var next = [UInt64](repeating: 0, count: words)
        live[0] = 1
        let subject = ignoringCase ? text.lowercased() : text
        // Buffer pointers: the loop below runs once per character and word of every row a stream's
        // conditions read, and array accesses with their checks cost several times the work itself.
        return live.withUnsafeMutableBufferPointer { live in
            next.withUnsafeMutableBufferPointer { next in
                anyCharacter.withUnsafeBufferPointer { anyCharacter in
                    stays.withUnsafeBufferPointer { stays in
                        asciiLiterals.withUnsafeBufferPointer { ascii in
                            var current = live
                            var following = next
                            for scalar in subject.unicodeScalars {
                                let code = Int(scalar.value)
                                let other = code < 128 ? nil : literals[scalar]
                                var carry: UInt64 = 0
                                var any: UInt64 = 0
                                for word in 0..<words {
                                    let state = current[word]
                                    let moved = (state << 1) | carry
                                    carry = state >> 63
                                    let leads = code < 128 ? ascii[code &* words &+ word] : (other?[word] ?? 0)
                                    let advanced = (moved & (anyCharacter[word] | leads)) | (state & stays[word])
                                    following[word] = advanced
                                    any |= advanced
                                }
                                guard any != 0 else { return false }
                                swap(&current, &following)
                            }
                            return current[finalWord] & finalBit != 0
                        }
                    }
                }
            }
        }
    }
}

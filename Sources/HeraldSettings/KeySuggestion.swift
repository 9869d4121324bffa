/// The known key a mistyped one was most likely meant to be, for "did you mean".
enum KeySuggestion {
    /// The closest of `known` by edit distance (`webhooks.orders.wehre` is
    /// `webhooks.orders.where`); nil when none is close: at most 1 edit for
    /// keys of up to 4 characters, 2 up to 8, and 3 beyond.
    static func closest(to key: String, among known: Set<String>) -> String? {
        let typed = Array(key.lowercased())
        let allowed = typed.count <= 4 ? 1 : typed.count <= 8 ? 2 : 3
        var best: (key: String, distance: Int)?
        for candidate in known.sorted() {
            let distance = editDistance(typed, Array(candidate.lowercased()), limit: allowed)
            if distance <= allowed, distance < (best?.distance ?? .max) { best = (candidate, distance) }
        }
        return best?.key
    }

    /// Levenshtein distance, counting a swap of two neighbours as one edit; stops early past `limit`.
    static func editDistance(_ a: [Character], _ b: [Character], limit: Int) -> Int {
        guard abs(a.count - b.count) <= limit else { return limit + 1 }
        if a.isEmpty || b.isEmpty { return max(a.count, b.count) }
        var previousRow: [Int] = []
        var row = Array(0...b.count)
        for i in 1...a.count {
            var next = [i] + Array(repeating: 0, count: b.count)
            for j in 1...b.count {
                let cost = a[i - 1] == b[j - 1] ? 0 : 1
                next[j] = min(row[j] + 1, next[j - 1] + 1, row[j - 1] + cost)
                if i > 1, j > 1, a[i - 1] == b[j - 2], a[i - 2] == b[j - 1] {
                    next[j] = min(next[j], previousRow[j - 2] + 1)
                }
            }
            guard next.min()! <= limit else { return limit + 1 }
            previousRow = row
            row = next
        }
        return row[b.count]
    }
}

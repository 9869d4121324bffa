import Testing
@testable import Herald

@Suite struct SupabaseFilterTests {
    private func row(_ members: (String, JSONValue)...) -> JSONObject {
        var object = JSONObject()
        for (key, value) in members { object[key] = value }
        return object
    }

    @Test func readsEveryOperator() throws {
        let predicates = try SupabaseFilter.parse(
            #"id=eq.1,a=neq.2,b=lt.3,c=lte.4,d=gt.5,e=gte.6,f=in.(x,"y,z"),g=is.null,h=like.A%,i=ilike.%b_,j=not.in.(1,2),k=not.is.null"#
        )
        #expect(predicates == [
            ColumnPredicate(column: "id", comparison: .eq, operand: .value("1")),
            ColumnPredicate(column: "a", comparison: .neq, operand: .value("2")),
            ColumnPredicate(column: "b", comparison: .lt, operand: .value("3")),
            ColumnPredicate(column: "c", comparison: .lte, operand: .value("4")),
            ColumnPredicate(column: "d", comparison: .gt, operand: .value("5")),
            ColumnPredicate(column: "e", comparison: .gte, operand: .value("6")),
            ColumnPredicate(column: "f", comparison: .in, operand: .list(["x", "y,z"])),
            ColumnPredicate(column: "g", comparison: .is, operand: .null),
            ColumnPredicate(column: "h", comparison: .like, operand: .value("A%")),
            ColumnPredicate(column: "i", comparison: .ilike, operand: .value("%b_")),
            ColumnPredicate(column: "j", comparison: .in, operand: .list(["1", "2"]), negated: true),
            ColumnPredicate(column: "k", comparison: .is, operand: .null, negated: true),
        ])
    }

    @Test func quotedValuesKeepCommasQuotesAndDots() throws {
        let predicates = try SupabaseFilter.parse(#"title=eq."a, \"b\". c",n=eq.2"#)
        #expect(predicates.map(\.operand) == [.value(#"a, "b". c"#), .value("2")])
    }

    @Test(arguments: [
        ("id", "is not column=op.value"),
        ("id=eq", "is not column=op.value"),
        ("id=match.^a", "operator match is not supported"),
        ("id=between.1", "unknown operator 'between'"),
        ("id=is.maybe", "is takes null, true or false"),
        (#"id=eq."open"#, "unterminated quote"),
        ("id=in.1,2", "in takes a list"),
    ])
    func refusesWithAReason(filter: String, reason: String) {
        #expect {
            try SupabaseFilter.parse(filter)
        } throws: { error in
            (error as? FilterError).map { $0.parameter == "filter" && $0.message.contains(reason) } ?? false
        }
    }

    @Test func likeFollowsSQL() {
        let matches = { (pattern: String, text: String, ignoringCase: Bool) in
            LikePattern(pattern, ignoringCase: ignoringCase).matches(text)
        }
        #expect(matches("Dr%", "Drama", false))
        #expect(!matches("dr%", "Drama", false))
        #expect(matches("dr%", "Drama", true))
        #expect(matches("%am_", "Drama", false))
        #expect(!matches("%am_", "Dramas", false))
        #expect(matches(#"100\%"#, "100%", false))
        #expect(!matches(#"100\%"#, "1000", false))
        #expect(matches("%a%b%c%", "xxaxxbxxcxx", false))
        #expect(!matches("%a%b%c%", "xxcxxbxxaxx", false))
        #expect(matches("Zo_", "Zoë", false))
        #expect(matches("", "", false))
        #expect(!matches("", "x", false))
        // Backtracking stays linear: this would take ages with naive recursion.
        #expect(!matches(String(repeating: "%a", count: 30) + "b", String(repeating: "a", count: 5000), false))
    }

    /// The automaton agrees with the textbook matcher (dynamic programming over
    /// pattern and text) on random patterns of `%`, `_`, escapes and letters, long
    /// enough to need several machine words of states.
    @Test func likeAgreesWithTheTextbookMatcherOnRandomPatterns() {
        func reference(_ pattern: [Character], _ text: [Character]) -> Bool {
            var tokens: [Character?] = [] // nil: %; "\u{0}": _
            var index = 0
            while index < pattern.count {
                switch pattern[index] {
                case "\\" where index + 1 < pattern.count: tokens.append(pattern[index + 1]); index += 1
                case "%": tokens.append(nil)
                case "_": tokens.append("\u{0}")
                default: tokens.append(pattern[index])
                }
                index += 1
            }
            var reachable = [Bool](repeating: false, count: text.count + 1)
            reachable[0] = true
            for token in tokens {
                var next = [Bool](repeating: false, count: text.count + 1)
                for position in 0...text.count where reachable[position] {
                    if token == nil {
                        for later in position...text.count { next[later] = true }
                    } else if position < text.count, token == "\u{0}" || token == text[position] {
                        next[position + 1] = true
                    }
                }
                reachable = next
            }
            return reachable[text.count]
        }
        var state: UInt64 = 0x9E37_79B9_7F4A_7C15
        func random(_ bound: Int) -> Int {
            state ^= state << 13; state ^= state >> 7; state ^= state << 17
            return Int(state % UInt64(bound))
        }
        let alphabet: [Character] = ["a", "b", "%", "_", "\\"]
        for _ in 0..<2_000 {
            let pattern = (0..<random(160)).map { _ in alphabet[random(alphabet.count)] }
            let text = (0..<random(200)).map { _ in alphabet[random(2)] }
            let expected = reference(pattern, text)
            #expect(LikePattern(String(pattern), ignoringCase: false).matches(String(text)) == expected, "\(String(pattern)) on \(String(text))")
        }
        // The pattern an attacker sent: one pass over the text, whatever its length.
        let attack = "%" + String(repeating: "_", count: 280) + "Z"
        #expect(LikePattern(attack, ignoringCase: true).matches(String(repeating: "x", count: 600) + "z"))
        #expect(!LikePattern(attack, ignoringCase: false).matches(String(repeating: "x", count: 600)))
    }

    @Test func negationIsSQLs() {
        let notOne = ColumnPredicate(column: "n", comparison: .eq, operand: .value("1"), negated: true)
        #expect(notOne.matches(row(("n", .number(JSONNumber(2))))))
        #expect(!notOne.matches(row(("n", .number(JSONNumber(1))))))
        // NOT (null = 1) is null, not true.
        #expect(!notOne.matches(row(("n", .null))))
        let notNull = ColumnPredicate(column: "n", comparison: .is, operand: .null, negated: true)
        #expect(notNull.matches(row(("n", .number(JSONNumber(2))))))
        #expect(!notNull.matches(row(("n", .null))))
        let likeNumber = ColumnPredicate(column: "n", comparison: .like, operand: .value("4%"))
        #expect(likeNumber.matches(row(("n", .number(JSONNumber(42))))))
    }

    @Test func whereParameterTakesNotAndLikeToo() throws {
        let filter = try FilterQuery.parse([("where", "name.not.ilike.%drama%"), ("where", "id.not.in.(1,2)")])
        #expect(filter.predicates == [
            ColumnPredicate(column: "name", comparison: .ilike, operand: .value("%drama%"), negated: true),
            ColumnPredicate(column: "id", comparison: .in, operand: .list(["1", "2"]), negated: true),
        ])
        #expect(try FilterQuery.parse(FilterQuery.queryItems(for: filter)) == filter)
    }
}

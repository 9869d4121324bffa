/// Random table definitions and statements, from the pieces the corpus
/// uses: column types, keys of none, one and two columns, generated columns,
/// and statements of one, a few and many rows. Deterministic for a seed,
/// which a failure names.
struct RandomTables {
    private var state: UInt64
    private let major: Int

    init(seed: UInt64, major: Int) {
        state = seed
        self.major = major
    }

    /// SplitMix64: small, and the same sequence on every platform.
    private mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }

    private mutating func below(_ bound: Int) -> Int { Int(next() % UInt64(bound)) }
    private mutating func pick<T>(_ choices: [T]) -> T { choices[below(choices.count)] }

    /// A column type and how to write a random value of it.
    private struct Piece: Sendable {
        var type: String
        var value: @Sendable (inout RandomTables) -> String
    }

    private static let pieces: [Piece] = [
        Piece(type: "int") { "\($0.below(2000) - 1000)" },
        Piece(type: "bigint") { "\(Int64(bitPattern: $0.next()))" },
        Piece(type: "text") { generator in
            "'" + generator.pick(["plain", "it''s", "ünï", "tab\t", "\"q\"", "back\\slash", "☃", ""]) + "\(generator.below(100))'"
        },
        Piece(type: "numeric") { generator in generator.pick(["'NaN'", "0", "-1.50", "123456789012345678901234567890.5", "'Infinity'"]) },
        Piece(type: "double precision") { generator in generator.pick(["'NaN'", "'-Infinity'", "1e308", "-0.5", "3"]) },
        Piece(type: "boolean") { generator in generator.pick(["true", "false"]) },
        Piece(type: "jsonb") { "'{\"n\": \($0.below(50)), \"a\": [1, \"x\"]}'" },
        Piece(type: "json") { "'{\"z\": \($0.below(50)),  \"s\": \"\\\\u00e9\"}'" },
        Piece(type: "timestamptz") { "'2026-0\($0.below(9) + 1)-1\($0.below(9)) 12:34:56.78+02'" },
        Piece(type: "int[]") { "'{\($0.below(9)),NULL,\($0.below(9))}'" },
        Piece(type: "mood") { generator in "'" + generator.pick(["sad", "ok", "happy"]) + "'" },
        Piece(type: "pair") { "ROW(\($0.below(9)), 'p''\($0.below(9))')" },
        Piece(type: "bytea") { "'\\x\(String($0.below(65536), radix: 16))'" },
        Piece(type: "interval") { "'\($0.below(400)) days \($0.below(24)) hours'" },
        Piece(type: "int4range") { generator in let low = generator.below(50); return "'[\(low),\(low + 1 + generator.below(9)))'" },
    ]

    /// The cases that create one random table and write to it.
    mutating func table(named name: String) -> [TriggerCorpus.Case] {
        let count = 1 + below(5)
        var columns: [(name: String, piece: Piece)] = []
        for index in 0..<count {
            columns.append(("c\(index) \(pick(["", "Ü", "\"x\""]))", Self.pieces[below(Self.pieces.count)]))
        }
        let keyKind = below(3)  // none, id, (id, k)
        var definitions = ["id int NOT NULL", "k text NOT NULL DEFAULT 'k'"]
        definitions += columns.map { "\(quoted($0.name)) \($0.piece.type)" }
        if below(2) == 0 { definitions.append("twice bigint GENERATED ALWAYS AS (id::bigint * 2) STORED") }
        if major >= 18, below(2) == 0 { definitions.append("negated int GENERATED ALWAYS AS (-id) VIRTUAL") }
        if keyKind == 1 { definitions.append("PRIMARY KEY (id)") }
        if keyKind == 2 { definitions.append("PRIMARY KEY (k, id)") }
        let table = quoted(name)
        var cases = [TriggerCorpus.Case(name: "create \(name)", sql: "CREATE TABLE \(table) (\(definitions.joined(separator: ", ")))", runner: .owner)]
        var nextID = 1
        for step in 0..<5 {
            let sql: String
            switch step == 0 ? 0 : below(4) {
            case 0:
                let rows = pick([1, 2, 3, 40, 64, 65, 120])
                let values = (0..<rows).map { _ -> String in
                    defer { nextID += 1 }
                    return "(\(nextID), \(columns.map { $0.piece.value(&self) }.joined(separator: ", ")))"
                }
                sql = "INSERT INTO \(table) (id, \(columns.map { quoted($0.name) }.joined(separator: ", "))) VALUES \(values.joined(separator: ", "))"
            case 1:
                let column = pick(columns)
                sql = "UPDATE \(table) SET \(quoted(column.name)) = \(column.piece.value(&self)) WHERE id % \(1 + below(4)) = 0"
            case 2:
                sql = "UPDATE \(table) SET id = id + 1000 WHERE id % \(2 + below(3)) = 1"
            default:
                sql = "DELETE FROM \(table) WHERE id % \(2 + below(5)) = \(below(2))"
            }
            cases.append(TriggerCorpus.Case(name: "\(name) step \(step)", sql: sql))
        }
        return cases
    }

    private func quoted(_ name: String) -> String {
        "\"" + name.replacingOccurrences(of: "\"", with: "\"\"") + "\""
    }
}

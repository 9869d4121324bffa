import Herald
import HeraldNATSOutput
import PropertyBased
import Testing

/// Subjects from the `nats.subject` template, and names made subject-safe reversibly.
@Suite struct NATSSubjectTemplateTests {
    @Test func fillsTheDefaultTemplate() throws {
        let template = try NATSSubjectTemplate("pgherald.{schema}.{table}.{op}")
        #expect(template.subject(for: makeEvent(1, table: "course")) == "pgherald.public.course.INSERT")
        #expect(template.subject(for: makeEvent(2, table: "my table.v2", schema: "Ünï")) == "pgherald.%C3%9Cn%C3%AF.my%20table%2Ev2.INSERT")
        #expect(template.wildcard == "pgherald.*.*.*")
        #expect(try NATSSubjectTemplate("app.changes.{schema}_{table}").wildcard == "app.changes.*")
    }

    @Test func refusesTemplatesThatCannotFormASubject() {
        for bad in ["pgherald.{tabel}", "pgherald.{schema", "pg herald.{table}", "pgherald.*.{table}", "pgherald..{table}", "pgherald.{op}.", ".{op}", "pgherald.>"] {
            #expect(throws: NATSSubjectError.self, "\(bad)") { try NATSSubjectTemplate(bad) }
        }
    }

    @Test func anyNameComesBackFromItsToken() async {
        let scalar = Gen.oneOf(Gen.unicodeScalar(in: " "..."~"), Gen.unicodeScalar(in: "\u{A0}"..."\u{2FFF}"), Gen.unicodeScalar(in: "\u{1F300}"..."\u{1F6FF}"))
        await propertyCheck(count: PropertyTests.cases(300), input: scalar.array(of: 1...20)) { scalars in
            var name = ""
            name.unicodeScalars.append(contentsOf: scalars)
            let token = NATSSubjectTemplate.escape(name)
            #expect(token.allSatisfy { $0.isASCII && ($0.isLetter || $0.isNumber || "_-%".contains($0)) })
            #expect(NATSSubjectTemplate.unescape(token) == name)
        }
    }
}

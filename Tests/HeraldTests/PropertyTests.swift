import Foundation
@testable import Herald
import PropertyBased
import Testing

/// Properties of the parsers and encoders that face untrusted input: any
/// filter survives its query-string form, no payload crashes the decoder,
/// the JSON parser agrees with Foundation's, and any row content comes back
/// exactly through a standard SSE parser and NDJSON lines.
@Suite struct PropertyTests {
    /// Cases per property: the suite's default, times `PGHERALD_PROPERTY_SCALE` (scripts/fuzz raises it).
    static func cases(_ count: Int) -> Int {
        count * max(1, Int(ProcessInfo.processInfo.environment["PGHERALD_PROPERTY_SCALE"] ?? "") ?? 1)
    }

    /// Text with what breaks naive encoders: control characters (NUL, CR, LF),
    /// quotes, backslashes, separators, accents and emoji.
    static let awkwardText = Gen.oneOf(
        Gen.unicodeScalar(in: "\u{0}"..."\u{7F}"),
        Gen.unicodeScalar(in: "\u{80}"..."\u{2FFF}"),
        Gen.unicodeScalar(in: "\u{1F300}"..."\u{1F6FF}")
    ).map(Character.init).string(of: 0...12)

    /// Names as PostgreSQL allows them: anything printable, 1 to 63 bytes.
    static let name = Gen.oneOf(
        Gen.unicodeScalar(in: " "..."~"),
        Gen.unicodeScalar(in: "\u{A0}"..."\u{2FFF}")
    ).map(Character.init).string(of: 1...12)

    /// A value built deterministically from a list of numbers, so that shrinking the list shrinks the value.
    static func jsonValue(_ recipe: [Int], strings: [String]) -> JSONValue {
        var position = 0
        func next() -> Int {
            defer { position += 1 }
            return position < recipe.count ? recipe[position] : 0
        }
        func build(depth: Int) -> JSONValue {
            let pick = next()
            switch depth > 3 ? pick % 4 : pick % 6 {
            case 0: return .null
            case 1: return .bool(pick % 2 == 0)
            case 2: return .number(JSONNumber(Int64(pick) * (pick % 3 == 0 ? -1 : 1)))
            case 3: return .string(strings.isEmpty ? "" : strings[pick % strings.count])
            case 4: return .array((0..<(next() % 4)).map { _ in build(depth: depth + 1) })
            default:
                var object = JSONObject()
                for index in 0..<(next() % 4) {
                    // Distinct keys: Foundation keeps one of duplicates, PostgreSQL's json keeps both.
                    let key = (strings.isEmpty ? "" : strings[(pick + index) % strings.count]) + "#\(index)"
                    object[key] = build(depth: depth + 1)
                }
                return .object(object)
            }
        }
        return build(depth: 0)
    }

    @Test func anyFilterSurvivesItsQueryStringForm() async {
        let table = zip(Self.name, Self.name).map { TableName(schema: $0.0, name: $0.1) }
        let predicate = zip(Self.name, Gen.int(in: 0...7), Self.awkwardText.array(of: 1...4)).map { input in
            let (column, kind, values) = input
            let comparisons: [ColumnPredicate.Comparison] = [.eq, .neq, .lt, .lte, .gt, .gte]
            return switch kind {
            case 6: ColumnPredicate(column: column, comparison: .in, operand: .list(values))
            case 7: ColumnPredicate(column: column, comparison: .is, operand: [.null, .true, .false][values.count % 3])
            default: ColumnPredicate(column: column, comparison: comparisons[kind], operand: .value(values[0]))
            }
        }
        await propertyCheck(count: Self.cases(300), input: table.array(of: 0...4), Gen.int(in: 1...15), predicate.array(of: 0...4)) { tables, operations, predicates in
            let filter = EventFilter(
                tables: tables.isEmpty ? nil : Set(tables), operations: OperationSet(rawValue: UInt8(operations)), predicates: predicates
            )
            let items = FilterQuery.queryItems(for: filter)
            #expect((try? FilterQuery.parse(items)) == filter, "\(items)")
        }
    }

    @Test func noQueryStringCrashesTheFilterParser() async {
        let parameter = Gen.oneOf(Gen.always("table"), Gen.always("op"), Gen.always("where"))
        await propertyCheck(count: Self.cases(500), input: zip(parameter, Self.awkwardText).array(of: 1...6)) { items in
            _ = try? FilterQuery.parse(items.map { (name: $0.0, value: $0.1) })
        }
    }

    @Test func noPayloadCrashesTheNotificationDecoder() async {
        let valid = Array(#"{"id":"7","op":"UPDATE","schema":"public","table":"t","pk":{"id":1},"new":{"id":1,"a":"x"},"old":{"id":1},"txid":"5","at":"2026-11-23T12:00:00.000000Z"}"#.utf8)
        // Arbitrary bytes, and a valid payload with some of its bytes replaced.
        await propertyCheck(count: Self.cases(500), input: Gen<UInt8>.value(in: 0...255).array(of: 0...300)) { bytes in
            _ = try? Event(payload: String(decoding: bytes, as: UTF8.self))
        }
        await propertyCheck(count: Self.cases(1000), input: zip(Gen.int(in: 0...(valid.count - 1)), Gen<UInt8>.value(in: 0...255)).array(of: 1...4)) { edits in
            var payload = valid
            for (offset, byte) in edits { payload[offset] = byte }
            _ = try? Event(payload: String(decoding: payload, as: UTF8.self))
        }
    }

    @Test func theJSONParserAgreesWithFoundation() async {
        await propertyCheck(count: Self.cases(300), input: Gen.int(in: 0...1000).array(of: 0...40), Self.awkwardText.array(of: 1...5)) { recipe, strings in
            let value = Self.jsonValue(recipe, strings: strings)
            var writer = JSONWriter()
            writer.write(value)
            // Ours reads back what it writes, and Foundation reads it as the same value.
            let text = String(decoding: writer.bytes, as: UTF8.self)
            #expect((try? JSONParser.parse(writer.bytes)) == value, "\(text)")
            guard let reference = try? JSONSerialization.jsonObject(with: Data(writer.bytes), options: .fragmentsAllowed) else {
                Issue.record("Foundation cannot read \(text)")
                return
            }
            #expect(Self.same(value, reference), "\(text)")
            // And ours reads what Foundation writes (its escapes, such as \/, and its own key order) as the same value.
            let written = (try? JSONSerialization.data(withJSONObject: reference, options: .fragmentsAllowed)) ?? Data()
            let reread = try? JSONParser.parse(Array(written))
            #expect(reread.map { Self.same($0, reference) } == true, "\(String(decoding: written, as: UTF8.self))")
        }
    }

    @Test func anyRowComesBackExactlyThroughSSEAndNDJSON() async {
        await propertyCheck(count: Self.cases(300), input: Self.awkwardText.array(of: 1...6)) { values in
            var row = JSONObject()
            for (index, value) in values.enumerated() { row["c\(index) \(value)"] = .string(value) }
            let event = Event(id: "9", operation: .insert, table: TableName(name: "t\n\r"), new: row, transactionID: "1", at: "2026-11-23T12:00:00.000000Z")
            let frames = Self.serverSentEvents(String(decoding: event.serverSentEventFrame, as: UTF8.self))
            #expect(frames.count == 1 && frames.first?.id == "9" && frames.first?.event == "INSERT")
            let decoded = try? Event(payload: frames.first?.data ?? "")
            #expect(decoded?.new == row && decoded?.table == event.table)
            // NDJSON: one line per event, whatever the row holds.
            let lines = (event.jsonBytes + [UInt8(ascii: "\n")]).split(separator: UInt8(ascii: "\n"), omittingEmptySubsequences: false)
            #expect(lines.count == 2 && lines[1].isEmpty)
            #expect((try? Event(payload: String(decoding: lines[0], as: UTF8.self)))?.new == row)
        }
    }

    /// The events of an SSE stream, read as the WHATWG specification says:
    /// lines end at CRLF, LF or CR; `data` lines join with LF; one space after the colon goes.
    static func serverSentEvents(_ stream: String) -> [(id: String?, event: String?, data: String)] {
        var events: [(id: String?, event: String?, data: String)] = []
        var id: String?
        var name: String?
        var data: [String] = []
        var lines: [Substring] = []
        var start = stream.unicodeScalars.startIndex
        var index = start
        let scalars = stream.unicodeScalars
        while index < scalars.endIndex {
            let scalar = scalars[index]
            if scalar == "\r" || scalar == "\n" {
                lines.append(Substring(scalars[start..<index]))
                var after = scalars.index(after: index)
                if scalar == "\r", after < scalars.endIndex, scalars[after] == "\n" { after = scalars.index(after: after) }
                start = after
                index = after
            } else {
                index = scalars.index(after: index)
            }
        }
        for line in lines {
            if line.isEmpty {
                if !data.isEmpty || name != nil { events.append((id, name, data.joined(separator: "\n"))) }
                name = nil
                data = []
                continue
            }
            if line.hasPrefix(":") { continue }
            let field = line.prefix { $0 != ":" }
            var value = line.dropFirst(field.count).dropFirst()
            if value.hasPrefix(" ") { value = value.dropFirst() }
            switch field {
            case "id": id = String(value)
            case "event": name = String(value)
            case "data": data.append(String(value))
            default: break
            }
        }
        return events
    }

    /// Whether our value and Foundation's are the same JSON.
    static func same(_ value: JSONValue, _ reference: Any) -> Bool {
        switch value {
        case .null: return reference is NSNull
        case .bool(let bool): return (reference as? NSNumber)?.boolValue == bool
        case .number(let number): return (reference as? NSNumber).map { "\($0.int64Value)" == number.text } ?? false
        case .string(let string): return reference as? String == string
        case .array(let items):
            guard let array = reference as? [Any], array.count == items.count else { return false }
            return zip(items, array).allSatisfy { same($0, $1) }
        case .object(let object):
            guard let dictionary = reference as? [String: Any], dictionary.count == object.count else { return false }
            return object.allSatisfy { member in dictionary[member.key].map { same(member.value, $0) } ?? false }
        }
    }
}

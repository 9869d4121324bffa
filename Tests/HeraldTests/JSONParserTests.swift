import Testing
@testable import Herald

@Suite struct JSONParserTests {
    @Test func keepsKeyOrderAndExactNumbers() throws {
        let value = try JSONParser.parse(#"{"z":1,"a":12345678901234567890.123456789,"m":-0.5e-7}"#)
        let object = try #require(value.objectValue)
        #expect(object.keys == ["z", "a", "m"])
        #expect(object["a"] == .number(JSONNumber(validatedText: "12345678901234567890.123456789")))
        #expect(value.jsonText == #"{"z":1,"a":12345678901234567890.123456789,"m":-0.5e-7}"#)
    }

    @Test func decodesEscapesAndUnicode() throws {
        let value = try JSONParser.parse(#"["a\"b\\c\/d\n\t\u00e9\ud83d\ude00", "ünï ✓"]"#)
        #expect(value == .array([.string("a\"b\\c/d\n\té😀"), .string("ünï ✓")]))
    }

    @Test func writerEscapesControlCharactersAndRoundTrips() throws {
        let original = JSONValue.object(["k\u{1}": .string("line\nbreak \"q\" \u{7}"), "n": .null, "b": .bool(false), "arr": .array([])])
        let text = original.jsonText
        #expect(text == #"{"k\u0001":"line\nbreak \"q\" \u0007","n":null,"b":false,"arr":[]}"#)
        #expect(try JSONParser.parse(text) == original)
    }

    @Test(arguments: [
        "", "   ", "not json", "{", "}", "[1,]", "{\"a\":1,}", "{\"a\" 1}", "{a:1}", "01", "1.", "-", "1e", "+1",
        "\"unterminated", "\"bad \\x escape\"", "\"\\u12\"", "\"\\ud800\"", "\"\\udc00\"", "\"tab\there\"",
        "tru", "nul", "[1] [2]", "{\"a\":1} x", "\u{0}",
    ])
    func rejectsInvalidDocuments(_ text: String) {
        #expect(throws: JSONParsingError.self) { try JSONParser.parse(text) }
    }

    @Test func rejectsNestingBeyondTheLimit() throws {
        let deep = String(repeating: "[", count: JSONParser.maximumDepth + 1) + String(repeating: "]", count: JSONParser.maximumDepth + 1)
        #expect(throws: JSONParsingError.self) { try JSONParser.parse(deep) }
        let allowed = String(repeating: "[", count: JSONParser.maximumDepth) + String(repeating: "]", count: JSONParser.maximumDepth)
        _ = try JSONParser.parse(allowed)
    }

    @Test func reportsWhereParsingStopped() {
        #expect(throws: JSONParsingError(offset: 7, reason: "expected ',' or '}'")) {
            try JSONParser.parse(#"{"a":1 "b":2}"#)
        }
    }
}

@Suite struct RawJSONTests {
    @Test func minifiesWithoutTouchingStrings() throws {
        var text = #" { "id" : 11 , "name" : "a  b\" : c" , "tags" : [ 1 , 2.5e3 , true , null ] } "#
        let raw = try text.withUTF8 { try RawJSON(validating: $0) }
        #expect(raw.description == #"{"id":11,"name":"a  b\" : c","tags":[1,2.5e3,true,null]}"#)
        #expect(raw.value["name"] == .string("a  b\" : c"))
    }

    @Test(arguments: [#"{"a":1"#, #"{"a":"\ud800"}"#, #"{"a":01}"#, #"{"a":"x"} extra"#, "[1,,2]"])
    func rejectsWhatTheTreeParserRejects(_ text: String) {
        var text = text
        #expect(throws: JSONParsingError.self) { try text.withUTF8 { try RawJSON(validating: $0) } }
    }
}

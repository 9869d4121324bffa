import HeraldPostgres
import Testing

@Suite struct ColumnTypeTests {
    @Test(arguments: [
        ("int4", "42", true), ("int4", "-7", true), ("int4", "abc", false), ("int4", "1.5", false),
        ("int2", "40000", false), ("int8", "9223372036854775807", true),
        ("numeric", "1.5e3", true), ("numeric", "NaN", true), ("float8", "ten", false),
        ("bool", "true", true), ("bool", "t", false),
        ("uuid", "6f1c1a52-8d1e-4c5e-9a57-0f0c8b1d2e3f", true), ("uuid", "6F1C1A52-8D1E-4C5E-9A57-0F0C8B1D2E3F", false), ("uuid", "x", false),
        ("text", "anything at all", true), ("date", "not checked", true),
    ])
    func valuesAreCheckedAgainstTheType(type: String, value: String, accepted: Bool) {
        #expect((ColumnType(name: type).problem(with: value) == nil) == accepted)
    }
}

/// Text that a client or a row may have written, made safe for a line that
/// a person reads in a terminal or a log: no control character can end the
/// line, forge the next one or command the terminal.
enum TerminalText {
    /// `text` with its control characters (and, when quoted, `"` and `\`) escaped: `\n`, `\r`, `\t`, else `\u{1b}`.
    static func escaped(_ text: String, quote: Bool) -> String {
        guard text.unicodeScalars.contains(where: { isControl($0) || (quote && ($0 == "\"" || $0 == "\\")) }) else { return text }
        var escaped = ""
        for scalar in text.unicodeScalars {
            switch scalar {
            case "\"" where quote: escaped += "\\\""
            case "\\" where quote: escaped += "\\\\"
            case "\n": escaped += "\\n"
            case "\r": escaped += "\\r"
            case "\t": escaped += "\\t"
            case _ where isControl(scalar): escaped += "\\u{\(String(scalar.value, radix: 16))}"
            default: escaped.unicodeScalars.append(scalar)
            }
        }
        return escaped
    }

    /// C0 and C1 controls, DEL, and the Unicode line and paragraph separators: whatever a terminal or a log reader may take for a line break or a command.
    static func isControl(_ scalar: Unicode.Scalar) -> Bool {
        scalar.value < 0x20 || (0x7F...0x9F).contains(scalar.value) || scalar.value == 0x2028 || scalar.value == 0x2029
    }
}

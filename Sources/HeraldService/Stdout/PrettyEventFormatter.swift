public import Herald

/// Renders an event as one line for people, with its id (what `tail --since`
/// and `Last-Event-ID` take, and which stays the same across restarts):
///
///     12:00:00.123  #17 INSERT public.course id=11  short_code=ADA3M name=Drama
///     12:00:01.004  #18 UPDATE public.course id=11  name: Drama → Theatre
public struct PrettyEventFormatter: Sendable {
    public var colour: Bool

    public init(colour: Bool) {
        self.colour = colour
    }

    public func line(for event: Event) -> String {
        let time = event.at.count >= 23 ? String(event.at.dropFirst(11).prefix(12)) : event.at
        var parts = [
            style("2", time),
            style("2", "#\(event.id)"),
            style(Self.colourCode(event.operation), event.operation.rawValue),
            style("1", TerminalText.escaped(event.table.description, quote: false)),
        ]
        if let key = event.primaryKey, !key.isEmpty { parts.append(Self.assignments(key)) }
        var line = parts.joined(separator: " ")
        if event.rowDataOmitted {
            line += "  " + style("2", "(row too large to notify; data omitted)")
        } else if let details = details(event) {
            line += "  " + details
        }
        return line
    }

    private func details(_ event: Event) -> String? {
        switch event.operation {
        case .insert, .broadcast:
            return event.new.map(Self.assignments)
        case .update:
            guard let new = event.new, let old = event.old else { return nil }
            let changes = new.compactMap { column -> String? in
                let before = old[column.key]
                guard before != column.value else { return nil }
                return "\(TerminalText.escaped(column.key, quote: false)): \(Self.text(before)) → \(Self.text(column.value))"
            }
            return changes.isEmpty ? style("2", "(no column changed)") : changes.joined(separator: " ")
        case .delete, .truncate:
            return nil
        }
    }

    private func style(_ code: String, _ text: String) -> String {
        colour ? "\u{1B}[\(code)m\(text)\u{1B}[0m" : text
    }

    private static func assignments(_ object: JSONObject) -> String {
        object.map { "\(TerminalText.escaped($0.key, quote: false))=\(text($0.value))" }.joined(separator: " ")
    }

    private static func text(_ value: JSONValue?) -> String {
        switch value {
        case .string(let string)?: return TerminalText.escaped(string, quote: false)
        case nil: return "∅"
        case let value?: return value.jsonText
        }
    }

    private static func colourCode(_ operation: Operation) -> String {
        switch operation {
        case .insert: return "32"
        case .update: return "33"
        case .delete: return "31"
        case .truncate: return "35"
        case .broadcast: return "36"
        }
    }
}

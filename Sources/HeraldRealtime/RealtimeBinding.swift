public import Herald

/// One `postgres_changes` binding of a joined channel: which changes the
/// client asked for, and the id its events are tagged with.
public struct RealtimeBinding: Sendable, Hashable {
    /// Tags this binding's events; non-zero, unique within the socket.
    public var id: Int
    public var operations: OperationSet
    /// `*` for every schema.
    public var schema: String
    /// Nil (or `*`) for every table of the schema.
    public var table: String?
    /// Supabase filter text, as sent.
    public var filter: String?
    /// The binding as the client sent it, with `id` added: the join reply
    /// repeats it exactly, because clients match bindings by comparing them.
    public var echo: JSONObject

    /// Reads one element of `config.postgres_changes`.
    init(_ value: JSONValue, id: Int) throws(PhoenixFrameError) {
        guard case .object(let object) = value else { throw PhoenixFrameError("each postgres_changes binding is an object") }
        let event = object["event"]?.stringValue ?? "*"
        switch event.uppercased() {
        case "*": operations = [.insert, .update, .delete]
        case "INSERT": operations = .insert
        case "UPDATE": operations = .update
        case "DELETE": operations = .delete
        default: throw PhoenixFrameError("binding event is *, INSERT, UPDATE or DELETE, not '\(event.prefix(40))'")
        }
        guard let schema = object["schema"]?.stringValue, !schema.isEmpty else {
            throw PhoenixFrameError("each postgres_changes binding names a schema")
        }
        for key in ["table", "filter"] {
            if let member = object[key], member.stringValue == nil, !member.isNull {
                throw PhoenixFrameError("binding \(key) must be a string")
            }
        }
        self.id = id
        self.schema = schema
        let table = object["table"]?.stringValue
        self.table = table == "*" ? nil : table
        let filter = object["filter"]?.stringValue
        self.filter = filter?.isEmpty == true ? nil : filter
        var echo = object
        echo["id"] = .number(JSONNumber(Int64(id)))
        self.echo = echo
    }

    /// The events this binding asks for, before any access grant.
    /// - Throws: the filter's problem, reported to the client in Supabase's words.
    public func eventFilter() throws(FilterError) -> EventFilter {
        var filter = EventFilter(operations: operations, predicates: try self.filter.map(SupabaseFilter.parse) ?? [])
        if let table {
            filter.tables = [TableName(schema: schema == "*" ? "public" : schema, name: table)]
        } else if schema != "*" {
            filter.schemas = [schema]
        }
        return filter
    }
}

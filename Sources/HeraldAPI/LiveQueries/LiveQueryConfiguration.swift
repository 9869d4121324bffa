public import Herald
public import HeraldSettings

/// Section `queries`: one live query per name.
///
/// ```yaml
/// queries:
///   enrolments_by_course:
///     sql: select c.id as course_id, c.name, count(e.*) as enrolled from course c left join enrols_in e on e.course_id = c.id group by c.id
///     key: [course_id]
///     params: []        # names of $1, $2… in order; subscribers give ?NAME=VALUE
///     tables: []        # default: the tables its plan reads
/// ```
public struct LiveQueryConfiguration: Sendable, Equatable {
    public var definitions: [LiveQueryDefinition]

    public init(definitions: [LiveQueryDefinition]) {
        self.definitions = definitions
    }

    static let settingKeys = ["sql", "key", "params", "tables", "as", "max_parameter_sets_per_user", "max_parameter_sets_per_key"]

    /// Nil without a `queries` section.
    public static func read(from settings: SettingsReader) throws(ConfigurationError) -> LiveQueryConfiguration? {
        let sections = settings.fileSections(under: "queries")
        guard !sections.isEmpty else { return nil }
        var definitions: [LiveQueryDefinition] = []
        for (name, _) in sections {
            definitions.append(try definition(named: name, settings))
        }
        return LiveQueryConfiguration(definitions: definitions)
    }

    private static func definition(named name: String, _ settings: SettingsReader) throws(ConfigurationError) -> LiveQueryDefinition {
        let prefix = "queries.\(name)"
        guard LiveQueryDefinition.isValidName(name) else {
            throw settings.fail(prefix, "a query's name must be letters, digits, - and _ (at most 63): clients ask for /queries/NAME")
        }
        guard let sql = settings.string("\(prefix).sql"), !sql.allSatisfy(\.isWhitespace) else {
            throw settings.fail("\(prefix).sql", "every query needs its sql: one SELECT, with $1, $2… for its params")
        }
        guard let key = settings.list("\(prefix).key"), !key.isEmpty, !key.contains(where: \.isEmpty) else {
            throw settings.fail("\(prefix).key", "every query needs a key: the result columns that identify a row, such as [course_id]")
        }
        settings.record("\(prefix).key", key.joined(separator: ", "))
        let parameters = settings.list("\(prefix).params") ?? []
        settings.record("\(prefix).params", parameters.isEmpty ? "(none)" : parameters.joined(separator: ", "))
        for parameter in parameters where !isParameterName(parameter) {
            throw settings.fail("\(prefix).params", "'\(parameter.prefix(80))' is not a parameter name: letters, digits and _, not starting with a digit")
        }
        if let repeated = parameters.first(where: { parameter in parameters.filter { $0 == parameter }.count > 1 }) {
            throw settings.fail("\(prefix).params", "\(repeated) is named twice")
        }
        var tables: [TableName]?
        if let names = settings.list("\(prefix).tables") {
            settings.record("\(prefix).tables", names.joined(separator: ", "))
            tables = []
            for text in names {
                do {
                    tables?.append(try FilterQuery.table(parsing: text))
                } catch {
                    throw settings.fail("\(prefix).tables", error.message)
                }
            }
        } else {
            settings.record("\(prefix).tables", "(the tables its plan reads)")
        }
        for key in settings.fileKeys(under: prefix) where !settingKeys.contains(where: { key == "\(prefix).\($0)" }) {
            throw settings.fail(key, "not a query setting (known: \(settingKeys.joined(separator: ", ")))")
        }
        let runsAs = settings.string("\(prefix).as", default: "daemon")
        guard runsAs == "daemon" || runsAs == "subscriber" else {
            throw settings.fail("\(prefix).as", "as is daemon (pgherald's role, once for everyone) or subscriber (each subscriber's row-level security), not '\(runsAs.prefix(40))'")
        }
        return LiveQueryDefinition(
            name: name, sql: sql, key: key, parameters: parameters, tables: tables, runsAsSubscriber: runsAs == "subscriber",
            parameterSetsPerUser: try settings.int("\(prefix).max_parameter_sets_per_user", default: 16, in: 1...Int.max),
            parameterSetsPerKey: try settings.int("\(prefix).max_parameter_sets_per_key", default: 1_000, in: 1...Int.max)
        )
    }

    private static func isParameterName(_ text: String) -> Bool {
        guard let first = text.first, !first.isNumber else { return false }
        return text.count <= 63 && text.allSatisfy { $0.isASCII && ($0.isLetter || $0.isNumber || $0 == "_") }
    }
}

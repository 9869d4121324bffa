import Herald

extension DaemonConfiguration {
    /// A filter written in the file in the socket's filter language: each key
    /// (one value or a list) stands for one query parameter; a list of `where`
    /// conditions is ANDed. A bad filter names the key it came from.
    static func filter(
        _ settings: SettingsReader, parameters: [(parameter: String, key: String)], reason: (FilterError) -> String
    ) throws(ConfigurationError) -> EventFilter {
        var items: [(name: String, value: String)] = []
        for (parameter, key) in parameters {
            guard let values = settings.list(key) else { continue }
            settings.record(key, values.joined(separator: parameter == "where" ? " AND " : ","))
            items += values.map { (parameter, $0) }
        }
        do {
            return try FilterQuery.parse(items)
        } catch {
            let key = parameters.first { $0.parameter == error.parameter }?.key ?? error.parameter
            throw settings.fail(key, reason(error))
        }
    }
}

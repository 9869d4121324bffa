import Foundation
import Yams

/// The keys of a YAML configuration file and the lines they stand on.
///
/// swift-configuration reads the values but keeps no positions and cannot
/// list the keys a file holds, so the file is also composed with Yams to
/// name lines in errors and to find keys that are not settings.
struct ConfigurationFile {
    let path: String
    /// Every leaf (a scalar or a list) by dotted key, with its line.
    private(set) var lines: [String: Int] = [:]

    init(path: String, text: String) throws(ConfigurationError) {
        self.path = path
        let root: Node?
        do {
            root = try Yams.compose(yaml: text)
        } catch {
            throw ConfigurationError(key: "(file)", source: path, reason: "not valid YAML: \(Self.describe(error))")
        }
        guard let root else { return }
        guard case .mapping = root else {
            throw ConfigurationError(key: "(file)", source: path, reason: "the file must be a mapping of settings (key: value)")
        }
        collect(root, prefix: nil)
    }

    private mutating func collect(_ node: Node, prefix: String?) {
        guard case .mapping(let mapping) = node else {
            // A key with nothing after it (a section whose keys are all commented out) sets nothing.
            if let prefix, node.null == nil { lines[prefix] = node.mark?.line ?? 0 }
            return
        }
        if mapping.count == 0, let prefix { lines[prefix] = node.mark?.line ?? 0 }
        for (key, value) in mapping {
            let name = key.string ?? "\(key)"
            collect(value, prefix: prefix.map { "\($0).\(name)" } ?? name)
        }
    }

    /// `pgherald.yaml line 12`.
    func source(of key: String) -> String? {
        lines[key].map { "\(path) line \($0)" }
    }

    /// Yams's error as one sentence that names the line and says what to do; never the file's text,
    /// which may hold a secret.
    static func describe(_ error: any Error) -> String {
        let context: YamlError.Context?
        let problem: String
        let mark: Mark
        switch error as? YamlError {
        case .scanner(let found, let text, let at, _)?, .parser(let found, let text, let at, _)?, .composer(let found, let text, let at, _)?:
            (context, problem, mark) = (found, text, at)
        case .duplicatedKeysInMapping(let duplicates, let found)?:
            return "line \(found.mark.line): the key \(duplicates.joined(separator: ", ")) is given twice in one section; keep one"
        default:
            return "\(error)".split(whereSeparator: \.isNewline).first.map(String.init) ?? "\(error)"
        }
        var sentence = "line \(mark.line), column \(mark.column): \(problem)"
        if let context { sentence += " (\(context.text) that began on line \(context.mark.line))" }
        if let hint = hints.first(where: { problem.contains($0.problem) })?.hint { sentence += "; \(hint)" }
        return sentence
    }

    private static let hints: [(problem: String, hint: String)] = [
        ("mapping values are not allowed", "indent each key under its section by the same number of spaces, and quote a value that holds ': '"),
        ("cannot start any token", "YAML indents with spaces, never tabs"),
        ("did not find expected key", "indent each key under its section by the same number of spaces"),
        ("found unexpected end of stream", "close the quote or bracket"),
        ("did not find expected node content", "close the bracket, or give the value"),
    ]
}

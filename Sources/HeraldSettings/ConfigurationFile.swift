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
            throw ConfigurationError(key: "(file)", source: path, reason: "not valid YAML: \(Self.oneLine("\(error)"))")
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

    /// Yams's message on one line, without the excerpt of the file it quotes (it may hold a secret).
    private static func oneLine(_ text: String) -> String {
        var lines = text.split(whereSeparator: \.isNewline).map { $0.trimmingCharacters(in: .whitespaces) }.filter { !$0.isEmpty }
        // libyaml's form quotes the offending line above a caret.
        if let caret = lines.firstIndex(of: "^"), caret > 0 { lines.removeSubrange((caret - 1)...caret) }
        let message = lines.prefix { !$0.hasPrefix("Context:") }
        let position = lines.last { $0.hasPrefix("in line ") }
        return (message + (position.map { [$0] } ?? [])).joined(separator: "; ")
    }
}

import Foundation

extension SettingsReader {
    /// The non-empty lines of a file holding secrets: `reference` is a path,
    /// or a bare name for a systemd credential in `$CREDENTIALS_DIRECTORY`.
    public func secretFile(_ reference: String, key: String) throws(ConfigurationError) -> (path: String, lines: [String]) {
        let path: String
        if reference.contains("/") {
            path = reference
        } else {
            guard let directory = sources.environment["CREDENTIALS_DIRECTORY"] else {
                throw fail(key, "'\(reference)' names a systemd credential, but CREDENTIALS_DIRECTORY is not set (use LoadCredential=\(reference):FILE in the unit, or give a path)")
            }
            path = "\(directory)/\(reference)"
        }
        let contents: String
        do {
            contents = try String(contentsOfFile: path, encoding: .utf8)
        } catch {
            throw fail(key, "cannot read \(path): \((error as NSError).localizedDescription)")
        }
        let lines = contents.split(whereSeparator: \.isNewline).map(String.init)
        return (path, lines)
    }
}

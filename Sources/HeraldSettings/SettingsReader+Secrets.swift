import Foundation

extension SettingsReader {
    /// The non-empty lines of a file holding secrets: `reference` is a path,
    /// or a bare name for a systemd credential in `$CREDENTIALS_DIRECTORY`.
    public func secretFile(_ reference: String, key: String) throws(ConfigurationError) -> (path: String, lines: [String]) {
        let path = try credentialPath(reference, key: key)
        let contents: String
        do {
            contents = try String(contentsOfFile: path, encoding: .utf8)
        } catch {
            throw fail(key, "cannot read \(path): \(Self.readFailure(error))")
        }
        let lines = contents.split(whereSeparator: \.isNewline).map(String.init)
        return (path, lines)
    }
}

extension SettingsReader {
    /// Why a file could not be read, in words that say what to do, where Foundation would say
    /// "The operation could not be completed".
    static func readFailure(_ error: any Error) -> String {
        switch (error as? CocoaError)?.code {
        case .fileReadNoSuchFile?:
            "no such file; create it, or correct the path"
        case .fileReadNoPermission?:
            "permission denied to user \(NSUserName()); let that user read it (chown or chmod)"
        case .fileReadInapplicableStringEncoding?, .fileReadCorruptFile?:
            "it is not UTF-8 text"
        default:
            if let posix = (error as NSError).userInfo[NSUnderlyingErrorKey] as? NSError, posix.domain == NSPOSIXErrorDomain {
                String(cString: strerror(Int32(posix.code)))
            } else {
                "\(error)"
            }
        }
    }
}

extension SettingsReader {
    /// The file `reference` names: a path, or a bare name for a systemd
    /// credential in `$CREDENTIALS_DIRECTORY`.
    public func credentialPath(_ reference: String, key: String) throws(ConfigurationError) -> String {
        if reference.contains("/") { return reference }
        guard let directory = sources.environment["CREDENTIALS_DIRECTORY"] else {
            throw fail(key, "'\(reference)' names a systemd credential, but CREDENTIALS_DIRECTORY is not set (use LoadCredential=\(reference):FILE in the unit, or give a path)")
        }
        return "\(directory)/\(reference)"
    }
}

extension SettingsReader {
    /// A key given inline as `prefix.key` or on the first line of
    /// `prefix.key_file`, recorded for `check-config` without its value; nil
    /// when neither is given.
    /// - Throws: an empty file, or a key shorter than `minimumLength`, naming `what`.
    public func keySecret(under prefix: String, minimumLength: Int, what: String) throws(ConfigurationError) -> String? {
        let secret: String
        if let inline = string("\(prefix).key", secret: true, recorded: false) {
            secret = inline
            record("\(prefix).key", "(set, \(inline.count) characters)")
        } else if let reference = string("\(prefix).key_file", recorded: false) {
            let (path, lines) = try secretFile(reference, key: "\(prefix).key_file")
            guard let first = lines.first?.trimmingCharacters(in: .whitespaces), !first.isEmpty else {
                throw fail("\(prefix).key_file", "\(path) is empty")
            }
            secret = first
            record("\(prefix).key_file", "\(path) (read)")
        } else {
            return nil
        }
        guard secret.utf8.count >= minimumLength else {
            throw fail("\(prefix).key", "\(what) must be at least \(minimumLength) characters, such as `openssl rand -hex 24`")
        }
        return secret
    }
}

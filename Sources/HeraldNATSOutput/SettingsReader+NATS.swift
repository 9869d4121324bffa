import Foundation
public import HeraldNATS
public import HeraldSettings

extension SettingsReader {
    /// `key`: a list of `nats://host:port` URLs, tried in turn; default `nats://127.0.0.1:4222`.
    public func natsServers(_ key: String) throws(ConfigurationError) -> [NATSOutputConfiguration.Server] {
        let urls = list(key) ?? ["nats://127.0.0.1:4222"]
        record(key, urls.joined(separator: ", "))
        var servers: [NATSOutputConfiguration.Server] = []
        for url in urls {
            guard let components = URLComponents(string: url), components.scheme == "nats", let host = components.host, !host.isEmpty,
                  components.path.isEmpty || components.path == "/" else {
                throw fail(key, "'\(url.prefix(80))' is not a nats://host:port URL")
            }
            guard components.user == nil else {
                throw fail(key, "keep credentials out of the URL: use user with password_file, token_file, nkey_seed_file or credentials_file")
            }
            servers.append(.init(host: host, port: components.port ?? 4222))
        }
        return servers
    }

    /// At most one way to authenticate under `prefix` (`user` with
    /// `password_file`, `token_file`, `nkey_seed_file`, `credentials_file`);
    /// every secret comes from a file (or a systemd credential) and is never recorded.
    public func natsAuthentication(under prefix: String) throws(ConfigurationError) -> NATSAuthentication {
        func secret(_ key: String) throws(ConfigurationError) -> String? {
            guard let reference = string(key, recorded: false) else { return nil }
            let (path, lines) = try secretFile(reference, key: key)
            record(key, "\(path) (read)")
            return lines.joined(separator: "\n")
        }
        let user = string("\(prefix).user")
        let password = try secret("\(prefix).password_file").map { $0.split(separator: "\n").first.map(String.init) ?? "" }
        let token = try secret("\(prefix).token_file").map { $0.split(separator: "\n").first.map(String.init) ?? "" }
        let seed = try secret("\(prefix).nkey_seed_file")
        let credentials = try secret("\(prefix).credentials_file")
        let chosen = [("user", user), ("token_file", token), ("nkey_seed_file", seed), ("credentials_file", credentials)]
            .filter { $0.1 != nil }.map { "\(prefix).\($0.0)" }
        if chosen.count > 1 {
            throw fail(chosen[1], "use one way to authenticate, not \(chosen.joined(separator: " and "))")
        }
        if let password {
            guard let user else { throw fail("\(prefix).password_file", "a password needs \(prefix).user") }
            return .password(user: user, password: password)
        }
        if user != nil { throw fail("\(prefix).user", "a user needs \(prefix).password_file") }
        if let token { return .token(token) }
        do throws(NATSError) {
            if let seed { return .nkey(try NATSNKey(seed: seed)) }
            if let credentials { return try NATSAuthentication(credentialsFile: credentials) }
        } catch {
            throw fail(seed != nil ? "\(prefix).nkey_seed_file" : "\(prefix).credentials_file", error.message)
        }
        return .none
    }

    /// `PREFIX.tls`, with `PREFIX.ca_file` for a private CA; nil when off.
    public func natsTLS(under prefix: String) throws(ConfigurationError) -> NATSTLS? {
        let tls = try bool("\(prefix).tls", default: false)
        let caFile = string("\(prefix).ca_file")
        if let caFile {
            guard FileManager.default.isReadableFile(atPath: caFile) else { throw fail("\(prefix).ca_file", "\(caFile) cannot be read") }
            guard tls else { throw fail("\(prefix).ca_file", "a CA file needs \(prefix).tls: true") }
        }
        return tls ? NATSTLS(trustRootsFile: caFile) : nil
    }
}

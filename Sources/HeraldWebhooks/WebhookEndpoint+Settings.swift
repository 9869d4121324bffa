import Foundation
import Herald
public import HeraldSettings

extension WebhookEndpoint {
    /// Keys an endpoint may have; anything else under `webhooks.NAME` is refused.
    static let settingKeys = [
        "url", "table", "op", "where", "secret", "secrets", "secret_file", "timeout", "max_attempts", "max_age",
        "concurrency", "ordered", "headers",
    ]

    /// The `webhooks:` section: one endpoint per name.
    public static func all(from settings: SettingsReader) throws(ConfigurationError) -> [WebhookEndpoint] {
        var endpoints: [WebhookEndpoint] = []
        for (name, _) in settings.fileSections(under: "webhooks") {
            endpoints.append(try endpoint(named: name, settings))
        }
        return endpoints
    }

    private static func endpoint(named name: String, _ settings: SettingsReader) throws(ConfigurationError) -> WebhookEndpoint {
        let prefix = "webhooks.\(name)"
        guard name.allSatisfy({ $0.isASCII && ($0.isLetter || $0.isNumber || $0 == "-" || $0 == "_") }), name.count <= 63 else {
            throw settings.fail(prefix, "an endpoint's name must be letters, digits, - and _ (at most 63): pending deliveries are kept under it")
        }
        guard let url = settings.string("\(prefix).url") else { throw settings.fail("\(prefix).url", "every endpoint needs a url") }
        guard let components = URLComponents(string: url), ["http", "https"].contains(components.scheme?.lowercased() ?? ""),
              let host = components.host, !host.isEmpty else {
            throw settings.fail("\(prefix).url", "'\(url.prefix(80))' is not an http:// or https:// URL with a host")
        }

        let filter = try settings.filter(
            parameters: ["table", "op", "where"].map { ($0, "\(prefix).\($0)") },
            reason: { "400 \($0.code.rawValue): \($0.message)" }
        )

        let secrets = try signingSecrets(prefix, settings)
        let timeout = try settings.value("\(prefix).timeout", default: "10s" as HumanDuration, expected: "a duration such as 10s")
        let maximumAttempts = try settings.int("\(prefix).max_attempts", default: 12, in: 1...1000)
        let maximumAge = try settings.value("\(prefix).max_age", default: "24h" as HumanDuration, expected: "a duration such as 24h")
        let concurrency = try settings.int("\(prefix).concurrency", default: 16, in: 1...1024)
        let ordered = try settings.bool("\(prefix).ordered", default: false)
        var headers: [String: String] = [:]
        for (header, _) in settings.fileSections(under: "\(prefix).headers") {
            let key = "\(prefix).headers.\(header)"
            let lowered = header.lowercased()
            guard !lowered.hasPrefix("webhook-"), lowered != "content-type", lowered != "content-length", lowered != "host" else {
                throw settings.fail(key, "pgherald sets \(header) itself")
            }
            // A header may carry a credential (authorization): shown by name only.
            headers[header] = settings.string(key, secret: true, recorded: false)
            settings.record(key, "(set)")
        }
        for key in settings.fileKeys(under: prefix) where !settingKeys.contains(where: { key == "\(prefix).\($0)" || key.hasPrefix("\(prefix).\($0).") }) {
            throw settings.fail(key, "not an endpoint setting (known: \(settingKeys.joined(separator: ", ")))")
        }
        return WebhookEndpoint(
            name: name, url: url, filter: filter, secrets: secrets,
            limits: .init(timeout: timeout.duration, maximumAttempts: maximumAttempts, maximumAge: maximumAge.duration),
            concurrency: concurrency, ordered: ordered, headers: headers
        )
    }

    /// `secret`, `secrets` (newest first, during a rotation) or `secret_file` (one per line).
    private static func signingSecrets(_ prefix: String, _ settings: SettingsReader) throws(ConfigurationError) -> [WebhookSecret] {
        var texts: [(key: String, text: String)] = []
        var shown: [String] = []
        var shownKey = "\(prefix).secrets"
        if let secret = settings.string("\(prefix).secret", secret: true, recorded: false) {
            texts.append(("\(prefix).secret", secret))
            shown.append("1 in the file")
            shownKey = "\(prefix).secret"
        }
        if let secrets = settings.list("\(prefix).secrets", secret: true) {
            texts += secrets.map { ("\(prefix).secrets", $0) }
            shown.append("\(secrets.count) in the file")
        }
        if let reference = settings.string("\(prefix).secret_file", recorded: false) {
            let (path, lines) = try settings.secretFile(reference, key: "\(prefix).secret_file")
            guard !lines.isEmpty else { throw settings.fail("\(prefix).secret_file", "\(path) is empty") }
            texts += lines.map { ("\(prefix).secret_file", $0) }
            shown.append("\(lines.count) from \(path)")
            shownKey = "\(prefix).secret_file"
        }
        guard !texts.isEmpty else {
            throw settings.fail("\(prefix).secret_file", "every endpoint signs its requests: set secret_file (or secret) to whsec_ and a base64 key, such as `echo whsec_$(openssl rand -base64 32)`")
        }
        var secrets: [WebhookSecret] = []
        for (key, text) in texts {
            do {
                secrets.append(try WebhookSecret(text))
            } catch {
                throw settings.fail(key, error.message)
            }
        }
        settings.record(shownKey, "(\(shown.joined(separator: ", ")); redacted)")
        return secrets
    }
}

public import HeraldSettings

extension NetworkConfiguration {
    /// The `http:` and `tls:` sections; nil without `http.listen`.
    public static func read(from settings: SettingsReader) throws(ConfigurationError) -> NetworkConfiguration? {
        guard let texts = settings.list("http.listen"), !texts.isEmpty else {
            for key in [
                "http.cors.origins", "http.plaintext", "http.max_connections", "http.handshake_timeout", "http.request_timeout", "http.idle_timeout",
                "http.max_connections_per_address", "http.proxies",
                "tls.cert_file", "tls.key_file",
            ] where settings.fileContains(key) {
                throw settings.fail(key, "is for the network listener, and http.listen is not set: name an address such as 0.0.0.0:8443")
            }
            settings.record("http.listen", "(none: the socket only)")
            return nil
        }
        let tls = try tlsFiles(settings)
        var listen: [ListenAddress] = []
        for text in texts {
            guard let address = ListenAddress(text) else {
                throw settings.fail("http.listen", "'\(text)' is not HOST:PORT, such as 0.0.0.0:8443 or [::1]:8443")
            }
            listen.append(address)
        }
        settings.record("http.listen", listen.map(\.description).joined(separator: ", "))
        let plaintext = try settings.bool("http.plaintext", default: false)
        if tls == nil {
            let exposed = listen.filter { !isLoopback($0) }
            if !exposed.isEmpty, !plaintext {
                throw settings.fail("http.listen", "\(exposed.map(\.description).joined(separator: ", ")) is not loopback, and there is no TLS: "
                    + "set tls.cert_file and tls.key_file, or http.plaintext: true behind a proxy that terminates TLS")
            }
        }
        let origins = settings.list("http.cors.origins") ?? []
        settings.record("http.cors.origins", origins.isEmpty ? "(none)" : origins.joined(separator: ", "))
        for origin in origins where !Self.isOrigin(origin) {
            throw settings.fail("http.cors.origins", "'\(origin)' is not an origin: scheme, host and port only, such as https://app.example.com")
        }
        let connections = try settings.int("http.max_connections", default: 10_000, in: 1...Int.max)
        return NetworkConfiguration(
            listen: listen, tls: tls, allowsPlaintext: plaintext, corsOrigins: origins, maximumConnections: connections, timeouts: try timeouts(settings),
            addressLimit: try AddressLimit(under: "http", settings)
        )
    }

    /// `http.handshake_timeout`, `http.request_timeout` and `http.idle_timeout`.
    private static func timeouts(_ settings: SettingsReader) throws(ConfigurationError) -> Timeouts {
        let handshake = try settings.value("http.handshake_timeout", default: "10s" as HumanDuration, expected: "a duration such as 10s")
        let request = try settings.value("http.request_timeout", default: "10s" as HumanDuration, expected: "a duration such as 10s")
        let idle = try settings.value("http.idle_timeout", default: "60s" as HumanDuration, expected: "a duration such as 60s")
        return Timeouts(handshake: handshake.duration, request: request.duration, idle: idle.duration)
    }

    /// `tls.cert_file` and `tls.key_file`, both or neither, each a path or a systemd credential's name.
    private static func tlsFiles(_ settings: SettingsReader) throws(ConfigurationError) -> TLSFiles? {
        let certificate = settings.string("tls.cert_file")
        let key = settings.string("tls.key_file")
        switch (certificate, key) {
        case (nil, nil):
            return nil
        case (let certificate?, let key?):
            let files = TLSFiles(
                certificatePath: try settings.credentialPath(certificate, key: "tls.cert_file"),
                keyPath: try settings.credentialPath(key, key: "tls.key_file")
            )
            do {
                _ = try CertificateStore.context(reading: files)
            } catch {
                throw settings.fail("tls.cert_file", error.description)
            }
            return files
        case (nil, _):
            throw settings.fail("tls.key_file", "is set without tls.cert_file: give both, PEM files or systemd credentials")
        case (_, nil):
            throw settings.fail("tls.cert_file", "is set without tls.key_file: give both, PEM files or systemd credentials")
        }
    }

    /// What `check-config` and the start warn of: plain HTTP off loopback.
    public var warnings: [String] {
        let exposed = tls == nil ? listen.filter { !Self.isLoopback($0) } : []
        guard !exposed.isEmpty else { return [] }
        return ["http.plaintext: tokens and rows cross \(exposed.map(\.description).joined(separator: ", ")) unencrypted; "
            + "only do this behind a proxy that terminates TLS"]
    }

    /// Whether `text` is a bare origin, as browsers send it in `Origin`.
    package static func isOrigin(_ text: String) -> Bool {
        guard let schemeEnd = text.range(of: "://") else { return false }
        let scheme = text[..<schemeEnd.lowerBound]
        let rest = text[schemeEnd.upperBound...]
        return (scheme == "https" || scheme == "http") && !rest.isEmpty && !rest.contains("/") && !rest.contains("?") && !rest.contains("#")
    }
}

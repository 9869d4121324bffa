public import ArgumentParser
import Foundation
public import HeraldClient

/// Where an example finds the daemon: its Unix socket, or its network
/// listener (`http.listen`) as a signed-in user.
public struct DaemonOptions: ParsableArguments {
    @Option(help: "The daemon's socket.")
    public var socket = "/run/pgherald/pgherald.sock"

    @Option(help: "The daemon's network listener instead of the socket, such as https://herald.example.com:8443.")
    public var url: String?

    @Option(help: ArgumentHelp(
        "A file holding the token presented over the network: a key, or a user's JWT.",
        discussion: "Read again before each connection, so that a token refreshed in the file is used at the next reconnect."
    ))
    public var tokenFile: String?

    @Option(help: "A PEM file of the private CA that issued the daemon's certificate.")
    public var caFile: String?

    public init() {}

    public func validate() throws {
        if url == nil, tokenFile != nil || caFile != nil { throw ValidationError("--token-file and --ca-file are for --url") }
        if let url, URL(string: url)?.scheme.map({ ["https", "http"].contains($0) }) != true {
            throw ValidationError("--url is https://HOST:PORT, not '\(url)'")
        }
    }

    /// Runs `body` with a client of the daemon, and closes what it opened afterwards.
    public func withClient<Result>(
        isolation: isolated (any Actor)? = #isolation, _ body: (HeraldClient) async throws -> Result
    ) async throws -> Result {
        guard let url = url.flatMap(URL.init(string:)) else { return try await body(HeraldClient(socketPath: socket)) }
        let httpClient = try caFile.map { try HeraldClient.httpClient(trustingCertificateAuthoritiesIn: $0) }
        let client: HeraldClient
        if let tokenFile {
            let read: HeraldClient.TokenProvider = {
                try String(contentsOfFile: tokenFile, encoding: .utf8).trimmingCharacters(in: .whitespacesAndNewlines)
            }
            client = HeraldClient(url: url, httpClient: httpClient ?? HeraldClient.sharedHTTPClient, token: read)
        } else {
            client = HeraldClient(url: url, token: nil, httpClient: httpClient ?? HeraldClient.sharedHTTPClient)
        }
        do {
            let result = try await body(client)
            try await httpClient?.shutdown()
            return result
        } catch {
            try? await httpClient?.shutdown()
            throw error
        }
    }
}

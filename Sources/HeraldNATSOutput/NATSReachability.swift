public import HeraldNATS

/// What `check-config --connect` proves of a NATS client before serve starts: a server of its list
/// takes the connection with its credentials, and the stream it reads or fills is there.
public struct NATSReachability: Sendable {
    /// The setting that lists the servers: `nats.servers`, `cluster.nats`.
    public var key: String
    /// Whose connection it is: `the NATS output`, `the edge`, `the cluster`.
    public var client: String
    public var servers: [NATSOutputConfiguration.Server]
    public var authentication: NATSAuthentication
    public var tls: NATSTLS?
    /// The stream the client needs, and whether it creates it when missing.
    public var stream: (name: String, created: Bool)?

    public init(
        key: String, client: String, servers: [NATSOutputConfiguration.Server], authentication: NATSAuthentication, tls: NATSTLS?,
        stream: (name: String, created: Bool)? = nil
    ) {
        self.key = key
        self.client = client
        self.servers = servers
        self.authentication = authentication
        self.tls = tls
        self.stream = stream
    }

    /// Why the client could not start, in serve's words.
    public struct Failure: Error, CustomStringConvertible {
        public var description: String
    }

    /// The client can start, but waits for what is not there yet: a warning, not a failure.
    package struct Waiting: Error, CustomStringConvertible {
        package var description: String
    }

    /// Tries the servers in order until one takes the connection.
    /// - Returns: what was found, for check-config to print.
    /// - Throws: ``Failure`` when serve could not start the client, ``Waiting`` when it would wait.
    public func check(version: String) async throws -> String {
        var refusals: [NATSError] = []
        let options = NATSConnectOptions(name: "pgherald check-config", version: version, authentication: authentication)
        for server in servers {
            do {
                let found = try await NATSConnection.withConnection(host: server.host, port: server.port, options: options, tls: tls) { [stream] connection in
                    guard let stream else { return "takes \(client)'s connection" }
                    if try await JetStream(connection: connection).stream(named: stream.name) != nil {
                        return "takes \(client)'s connection, and has JetStream stream \(stream.name)"
                    }
                    guard stream.created else {
                        // As serve does: an edge started before any database daemon waits for the stream.
                        throw Waiting(description: "\(key): \(server): JetStream has no stream \(stream.name) yet; \(client) waits for it, "
                            + "which a database daemon's NATS output makes (nats.create_stream), or create it")
                    }
                    return "takes \(client)'s connection, and has JetStream; the output creates stream \(stream.name) at start"
                }
                return "\(server) \(found)"
            } catch let error as NATSError where error.code == .notListening {
                refusals.append(error)
            } catch let waiting as Waiting {
                throw waiting
            } catch {
                throw Failure(description: "\(key): \(server): \(error)")
            }
        }
        throw Failure(description: NATSStartFailure(key: key, client: client, refusals: refusals).description)
    }
}

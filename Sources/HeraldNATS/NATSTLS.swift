/// TLS to a NATS server, which a server that requires it asks for in its `INFO`.
public struct NATSTLS: Sendable, Equatable {
    /// PEM certificates to trust instead of the system's roots; nil trusts the system's.
    public var trustRootsFile: String?

    public init(trustRootsFile: String? = nil) {
        self.trustRootsFile = trustRootsFile
    }
}

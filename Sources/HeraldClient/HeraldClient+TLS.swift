public import AsyncHTTPClient
import NIOSSL

extension HeraldClient {
    /// An HTTP client that trusts the certificate authorities in
    /// `pemFile` besides the system's, for a daemon whose certificate a
    /// private CA issued. HTTP/2 is used when the daemon offers it.
    ///
    /// Create it once and keep it: each holds its own connection pool, and it
    /// must be shut down before it is released.
    public static func httpClient(trustingCertificateAuthoritiesIn pemFile: String) throws -> HTTPClient {
        var tls = TLSConfiguration.makeClientConfiguration()
        tls.additionalTrustRoots = [.file(pemFile)]
        var configuration = httpConfiguration
        configuration.tlsConfiguration = tls
        return HTTPClient(eventLoopGroupProvider: .singleton, configuration: configuration)
    }
}

import AsyncHTTPClient
import Foundation
import NIOSSL
import Testing

/// Server certificates for `localhost`, 127.0.0.1 and ::1, each test's in
/// a temporary directory of its own, issued with `openssl` by one test CA
/// that the whole test process trusts (``httpClient``).
struct TestCertificates {
    /// The test CA's directory, made once per test process.
    static let authority: URL = {
        let directory = FileManager.default.temporaryDirectory.appending(path: "pgherald-ca-\(UUID().uuidString.prefix(8))")
        try? FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/openssl")
        process.arguments = [
            "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes", "-days", "2",
            "-subj", "/CN=pgherald test CA", "-keyout", directory.appending(path: "ca.key").path, "-out", directory.appending(path: "ca.pem").path,
        ]
        process.standardError = FileHandle.nullDevice
        try? process.run()
        process.waitUntilExit()
        return directory
    }()

    /// An HTTP client that trusts the test CA, with HTTP/2 when the server offers it.
    static let httpClient: HTTPClient = {
        var tls = TLSConfiguration.makeClientConfiguration()
        tls.trustRoots = .file(authority.appending(path: "ca.pem").path)
        var configuration = HTTPClient.Configuration(tlsConfiguration: tls, timeout: .init(connect: .seconds(10)))
        configuration.httpVersion = .automatic
        return HTTPClient(eventLoopGroupProvider: .singleton, configuration: configuration)
    }()

    let directory: URL
    var caPath: String { Self.authority.appending(path: "ca.pem").path }
    var certificatePath: String { directory.appending(path: "server.pem").path }
    var keyPath: String { directory.appending(path: "server.key").path }

    init() async throws {
        directory = FileManager.default.temporaryDirectory.appending(path: "pgherald-tls-\(UUID().uuidString.prefix(8))")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        _ = try await issue(serverNamed: "server")
    }

    /// Issues a new server certificate into `server.pem` and `server.key`
    /// (written whole, then renamed over the old ones); returns its serial number as openssl prints it.
    @discardableResult
    func issue(serverNamed name: String) async throws -> String {
        let key = directory.appending(path: "\(name).key.new").path
        let request = directory.appending(path: "\(name).csr").path
        let certificate = directory.appending(path: "\(name).pem.new").path
        let extensions = directory.appending(path: "ext.cnf").path
        try "subjectAltName=DNS:localhost,IP:127.0.0.1,IP:::1\n".write(toFile: extensions, atomically: true, encoding: .utf8)
        try await openssl([
            "req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes", "-subj", "/CN=localhost", "-keyout", key, "-out", request,
        ])
        try await openssl([
            "x509", "-req", "-in", request, "-CA", caPath, "-CAkey", Self.authority.appending(path: "ca.key").path, "-set_serial",
            String(UInt32.random(in: 1...UInt32.max)), "-days", "2", "-extfile", extensions, "-out", certificate,
        ])
        guard rename(key, keyPath) == 0, rename(certificate, certificatePath) == 0 else { throw Failure(description: "cannot rename: \(errno)") }
        return try await serial(ofCertificateAt: certificatePath)
    }

    /// The serial number of the certificate in `path`.
    func serial(ofCertificateAt path: String) async throws -> String {
        try await openssl(["x509", "-noout", "-serial", "-in", path]).trimmingCharacters(in: .whitespacesAndNewlines)
    }

    /// The serial number of the certificate a new TLS connection to `port` is shown.
    func servedSerial(port: Int) async throws -> String {
        let served = directory.appending(path: "served-\(UUID().uuidString.prefix(6)).pem").path
        let shown = try await DaemonProcess(
            ["-c", "openssl s_client -connect 127.0.0.1:\(port) -servername localhost </dev/null 2>/dev/null | openssl x509 -out \(served)"],
            executable: URL(fileURLWithPath: "/bin/sh")
        ).finish(within: 20)
        try #require(shown.status == 0, "openssl s_client: \(shown.stderr)")
        return try await serial(ofCertificateAt: served)
    }

    struct Failure: Error, CustomStringConvertible {
        let description: String
    }

    @discardableResult
    private func openssl(_ arguments: [String]) async throws -> String {
        let result = try await DaemonProcess(arguments, executable: URL(fileURLWithPath: "/usr/bin/openssl")).finish(within: 30)
        guard result.status == 0 else { throw Failure(description: "openssl \(arguments.prefix(2).joined(separator: " ")): \(result.stderr)") }
        return result.stdout
    }
}

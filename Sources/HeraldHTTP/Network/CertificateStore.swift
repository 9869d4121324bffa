package import NIOSSL
import Synchronization

/// The TLS context new connections get, read from `tls.cert_file` and
/// `tls.key_file`. A reload (SIGHUP) reads the files again: connections
/// made after it get the new certificate, and open ones keep theirs, so no
/// stream is dropped. A pair that cannot be read leaves the old one in force.
package final class CertificateStore: Sendable {
    /// Why a certificate and key cannot be used, naming the file.
    package struct Failure: Error, CustomStringConvertible {
        package let description: String
    }

    package let files: NetworkConfiguration.TLSFiles
    private let current: Mutex<NIOSSLContext>

    package init(files: NetworkConfiguration.TLSFiles) throws(Failure) {
        self.files = files
        current = Mutex(try Self.context(reading: files))
    }

    /// The context for a connection accepted now.
    package var context: NIOSSLContext { current.withLock { $0 } }

    /// Reads the files again and uses them for new connections.
    package func reload() throws(Failure) {
        let context = try Self.context(reading: files)
        current.withLock { $0 = context }
    }

    /// A server context for `files`, offering HTTP/2 and HTTP/1.1 by ALPN, TLS 1.2 at least.
    package static func context(reading files: NetworkConfiguration.TLSFiles) throws(Failure) -> NIOSSLContext {
        let chain: [NIOSSLCertificate]
        do {
            chain = try NIOSSLCertificate.fromPEMFile(files.certificatePath)
        } catch {
            throw Failure(description: "cannot read a PEM certificate from \(files.certificatePath): \(error)")
        }
        guard !chain.isEmpty else { throw Failure(description: "\(files.certificatePath) holds no PEM certificate") }
        let key: NIOSSLPrivateKey
        do {
            key = try NIOSSLPrivateKey(file: files.keyPath, format: .pem)
        } catch {
            throw Failure(description: "cannot read a PEM private key from \(files.keyPath): \(error)")
        }
        var configuration = TLSConfiguration.makeServerConfiguration(certificateChain: chain.map { .certificate($0) }, privateKey: .privateKey(key))
        configuration.minimumTLSVersion = .tlsv12
        configuration.applicationProtocols = ["h2", "http/1.1"]
        // A connection we close waits this long for the client's close_notify, NIO's 5 s by default:
        // a client that never answers would hold its descriptor that much past every deadline.
        configuration.shutdownTimeout = .seconds(1)
        do {
            return try NIOSSLContext(configuration: configuration)
        } catch NIOSSLError.failedToLoadPrivateKey {
            // BoringSSL's words for a key that is valid but not the certificate's.
            throw Failure(description: "\(files.keyPath) is not the key of the certificate in \(files.certificatePath): give tls.key_file the key the certificate was made with")
        } catch {
            throw Failure(description: "\(files.keyPath) is not the key of the certificate in \(files.certificatePath), or either is unusable: \(error)")
        }
    }
}

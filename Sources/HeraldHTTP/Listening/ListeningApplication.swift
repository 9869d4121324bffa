package import Hummingbird
import ServiceLifecycle

/// A Hummingbird application on the TCP address a setting names, whose
/// bind failure says which setting and address (``ListenFailure``) rather
/// than NIO's system call.
package struct ListeningApplication<Application: ApplicationProtocol>: Service {
    package let application: Application
    /// The setting that names ``address``, such as `http.listen`.
    package let key: String
    package let address: ListenAddress

    package init(application: Application, key: String, address: ListenAddress) {
        self.application = application
        self.key = key
        self.address = address
    }

    package func run() async throws {
        do {
            try await application.run()
        } catch is CancellationError {
            throw CancellationError()
        } catch {
            // Once bound, an application logs its errors and returns: what it throws is a failed start.
            throw ListenFailure(key: key, address: address, error: error)
        }
    }
}

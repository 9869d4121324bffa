import HeraldSupport
import NIOCore
import NIOPosix

extension NATSConnection {
    /// Why a connection could not be made, in plain words: `connection
    /// refused`, `no answer within 5 s`, `cannot resolve nats.example`, not
    /// NIO's `Connection errors: connect(descriptor:addr:size:): …`.
    static func plainWords(connecting error: any Error, timeout: Duration) -> String {
        switch error {
        case let error as NIOConnectionError:
            if error.dnsAError != nil || error.dnsAAAAError != nil { return "cannot resolve \(error.host)" }
            return error.connectionErrors.first.map { plainWords(connecting: $0.error, timeout: timeout) } ?? "cannot connect"
        case let error as IOError:
            return error.plainWords
        case ChannelError.connectTimeout:
            return "no answer within \(timeout)"
        default:
            return "\(error)"
        }
    }
}

import Crypto
import Foundation

/// Signs webhook requests as Standard Webhooks specifies.
///
/// The signature is `v1,` and the base64 HMAC-SHA256 of `id.timestamp.body`;
/// with several secrets (during a rotation) the header carries one signature
/// per secret, separated by spaces, so a receiver holding either verifies.
public struct WebhookSigner: Sendable {
    public let secrets: [WebhookSecret]

    public init(secrets: [WebhookSecret]) {
        self.secrets = secrets
    }

    /// The `webhook-signature` header value.
    public func signature(id: String, timestamp: Int64, body: [UInt8]) -> String {
        var message = Array("\(id).\(timestamp).".utf8)
        message.append(contentsOf: body)
        return secrets.map { secret in
            let code = HMAC<SHA256>.authenticationCode(for: message, using: SymmetricKey(data: secret.key))
            return "v1," + Data(code).base64EncodedString()
        }.joined(separator: " ")
    }
}

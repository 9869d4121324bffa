import Foundation

/// A signing key in Standard Webhooks' form: `whsec_` and the key in base64.
///
/// Its description never shows the key, so a secret that reaches a log line,
/// an error or `check-config` by accident reveals nothing.
public struct WebhookSecret: Sendable, Hashable, CustomStringConvertible {
    /// Shorter keys are easy to guess; Standard Webhooks asks for 24 to 64 bytes.
    public static let minimumKeyBytes = 16
    static let prefix = "whsec_"

    let key: [UInt8]

    /// - Throws: ``WebhookConfigurationError`` naming what is wrong, never the text itself.
    public init(_ text: String) throws(WebhookConfigurationError) {
        let trimmed = text.trimmingCharacters(in: .whitespacesAndNewlines)
        guard trimmed.hasPrefix(Self.prefix) else {
            throw WebhookConfigurationError(.invalidSecret, "a secret must look like whsec_<base64> (Standard Webhooks); this one does not start with whsec_")
        }
        guard let key = Data(base64Encoded: String(trimmed.dropFirst(Self.prefix.count))) else {
            throw WebhookConfigurationError(.invalidSecret, "the part after whsec_ is not base64")
        }
        guard key.count >= Self.minimumKeyBytes else {
            throw WebhookConfigurationError(.invalidSecret, "the key is \(key.count) bytes; use at least \(Self.minimumKeyBytes) (openssl rand -base64 32)")
        }
        self.key = Array(key)
    }

    public var description: String { "whsec_(redacted)" }
}

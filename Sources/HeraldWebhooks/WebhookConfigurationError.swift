/// A webhook endpoint that cannot be used as configured.
public struct WebhookConfigurationError: Error, Hashable, CustomStringConvertible {
    public enum Code: String, Sendable {
        case invalidSecret = "invalid_secret"
        case invalidURL = "invalid_url"
        case invalidSetting = "invalid_setting"
    }

    public var code: Code
    /// What is wrong and what to do; never contains a secret.
    public var message: String

    public init(_ code: Code, _ message: String) {
        self.code = code
        self.message = message
    }

    public var description: String { message }
}

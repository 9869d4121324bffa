public import HeraldOutput
public import HeraldSettings

extension StdoutOutput: Output {
    /// Key `stdout`: `none` (the default), `json` or `pretty`.
    public static let section = "stdout"
    public static let reloadableKeys = ["stdout"]

    public static func configuration(from settings: SettingsReader) throws(ConfigurationError) -> StdoutFormat? {
        try settings.choice("stdout", default: StdoutChoice.none).format
    }

    public convenience init(configuration: StdoutFormat, context: OutputContext) {
        self.init(broker: context.broker, format: configuration, logger: context.logger)
    }

    /// Switches between json and pretty; `none` needs a restart.
    public func reload(_ configuration: StdoutFormat) async {
        setFormat(configuration)
    }

    public var report: OutputReport {
        OutputReport(statistics: .init(feed: .live, delivered: printed.withLock { $0 }))
    }
}

extension Duration {
    /// Seconds with two decimals and a unit, as logs and status lines show a
    /// delay: `0.22s`, `30.00s`.
    public var secondsText: String {
        let hundredths = Int64((self / .milliseconds(10)).rounded())
        let fraction = hundredths % 100
        return "\(hundredths / 100).\(fraction < 10 ? "0" : "")\(fraction)s"
    }
}

import Herald
import Testing

@Suite struct DurationTextTests {
    @Test(arguments: [
        (Duration.milliseconds(215), "0.22s"), (.seconds(30), "30.00s"), (.milliseconds(5), "0.01s"), (.zero, "0.00s"), (.milliseconds(1250), "1.25s"),
    ])
    func delaysReadAsSecondsWithTwoDecimals(duration: Duration, text: String) {
        #expect(duration.secondsText == text)
    }
}

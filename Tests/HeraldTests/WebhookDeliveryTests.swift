import Foundation
import Herald
import HeraldWebhooks
import HeraldSettings
import Testing

@Suite struct WebhookSigningTests {
    @Test func signsLikeTheStandardWebhooksReferenceVector() throws {
        // The example in the Standard Webhooks specification and its reference libraries.
        let secret = try WebhookSecret("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw")
        let signature = WebhookSigner(secrets: [secret]).signature(
            id: "msg_p5jXN8AQM9LWM0D4loKWxJek", timestamp: 1_614_265_330, body: Array(#"{"test": 2432232314}"#.utf8)
        )
        #expect(signature == "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=")
    }

    @Test func aRotationSignsWithEverySecretNewestFirst() throws {
        let new = try WebhookSecret("whsec_" + Data(repeating: 1, count: 32).base64EncodedString())
        let old = try WebhookSecret("whsec_" + Data(repeating: 2, count: 32).base64EncodedString())
        let body = Array("{}".utf8)
        let both = WebhookSigner(secrets: [new, old]).signature(id: "1", timestamp: 5, body: body)
        let parts = both.split(separator: " ").map(String.init)
        #expect(parts == [
            WebhookSigner(secrets: [new]).signature(id: "1", timestamp: 5, body: body),
            WebhookSigner(secrets: [old]).signature(id: "1", timestamp: 5, body: body),
        ])
        #expect(parts[0] != parts[1])
    }

    @Test func secretsAreCheckedAndNeverShown() throws {
        let text = "whsec_" + Data(repeating: 7, count: 24).base64EncodedString()
        let secret = try WebhookSecret(text)
        #expect("\(secret)" == "whsec_(redacted)")
        #expect(!"\(String(reflecting: secret))".contains(text.dropFirst(6)))
        for bad in ["MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", "whsec_not*base64", "whsec_" + Data(repeating: 1, count: 8).base64EncodedString()] {
            #expect(throws: WebhookConfigurationError.self) { try WebhookSecret(bad) }
            do { _ = try WebhookSecret(bad) } catch { #expect(!error.message.contains(bad)) }
        }
    }
}

@Suite struct WebhookRetryTests {
    let schedule = RetrySchedule()

    @Test func stepsDoubleFromOneSecondUpToAnHour() {
        #expect(schedule.step(afterFailures: 1) == .seconds(1))
        #expect(schedule.step(afterFailures: 2) == .seconds(2))
        #expect(schedule.step(afterFailures: 5) == .seconds(16))
        #expect(schedule.step(afterFailures: 12) == .seconds(2048))
        #expect(schedule.step(afterFailures: 13) == .seconds(3600))
        #expect(schedule.step(afterFailures: 500) == .seconds(3600))
    }

    @Test func jitterStaysInTheUpperHalfSoGapsNeverShrink() {
        for failures in 1...14 {
            let step = schedule.step(afterFailures: failures)
            #expect(schedule.delay(afterFailures: failures, jitter: 0) == step / 2)
            #expect(schedule.delay(afterFailures: failures, jitter: 1) == step)
            // Below the cap, the shortest next gap is at least the longest gap before it.
            guard schedule.step(afterFailures: failures + 1) == step * 2 else { continue }
            #expect(schedule.delay(afterFailures: failures + 1, jitter: 0) >= schedule.delay(afterFailures: failures, jitter: 0.999))
        }
    }

    @Test func retryAfterTakesSecondsAndHTTPDates() {
        let now = Date(timeIntervalSince1970: 784_111_777) // Sun, 06 Nov 1994 08:49:37 GMT
        #expect(RetryAfter.parse("2") == .seconds(2))
        #expect(RetryAfter.parse(" 120 ") == .seconds(120))
        #expect(RetryAfter.parse("Sun, 06 Nov 1994 08:49:47 GMT", now: now) == .seconds(10))
        #expect(RetryAfter.parse("Sunday, 06-Nov-94 08:50:37 GMT", now: now) == .seconds(60))
        #expect(RetryAfter.parse("Sun, 06 Nov 1994 08:00:00 GMT", now: now) == .zero)
        #expect(RetryAfter.parse("-1") == nil)
        #expect(RetryAfter.parse("soon") == nil)
    }

    @Test func answersAreClassified() {
        #expect(DeliveryOutcome.answer(status: 200, retryAfter: nil) == .delivered(status: 200))
        #expect(DeliveryOutcome.answer(status: 204, retryAfter: nil) == .delivered(status: 204))
        for status in [408, 409, 425, 429, 500, 502, 503, 504] {
            #expect(DeliveryOutcome.answer(status: status, retryAfter: nil) == .retryable(status: status, error: "HTTP \(status)", retryAfter: nil))
        }
        for status in [301, 400, 401, 403, 404, 410, 413, 422] {
            #expect(DeliveryOutcome.answer(status: status, retryAfter: nil) == .permanent(status: status, error: "HTTP \(status)"))
        }
    }

    @Test func decisionsFollowAttemptsAgeAndRetryAfter() {
        let limits = WebhookEndpoint.Limits(timeout: .seconds(10), maximumAttempts: 3, maximumAge: .seconds(60))
        let unavailable = DeliveryOutcome.retryable(status: 503, error: "HTTP 503", retryAfter: nil)
        func decide(_ outcome: DeliveryOutcome, attempts: Int, age: Duration = .zero) -> DeliveryDecision {
            DeliveryDecision.after(outcome, attempts: attempts, age: age, limits: limits, schedule: schedule, jitter: 1)
        }
        #expect(decide(.delivered(status: 200), attempts: 3) == .done)
        #expect(decide(unavailable, attempts: 1) == .retry(after: .seconds(1)))
        #expect(decide(unavailable, attempts: 2) == .retry(after: .seconds(2)))
        guard case .deadLetter(let reason) = decide(unavailable, attempts: 3) else { Issue.record("retried past max_attempts"); return }
        #expect(reason.contains("max_attempts"))
        guard case .deadLetter(let aged) = decide(unavailable, attempts: 1, age: .seconds(59.5)) else { Issue.record("retried past max_age"); return }
        #expect(aged.contains("max_age"))
        guard case .deadLetter(let refused) = decide(.permanent(status: 400, error: "HTTP 400"), attempts: 1) else { Issue.record("retried a 400"); return }
        #expect(refused.contains("HTTP 400"))
        let throttled = DeliveryOutcome.retryable(status: 429, error: "HTTP 429", retryAfter: .seconds(7))
        #expect(decide(throttled, attempts: 1) == .retry(after: .seconds(7)))
    }
}

@Suite struct EndpointGateTests {
    let start = ContinuousClock.now
    let unavailable = DeliveryOutcome.retryable(status: 503, error: "HTTP 503", retryAfter: nil)

    @Test func aHealthyEndpointGetsItsConcurrency() {
        let gate = EndpointGate(concurrency: 16)
        #expect(gate.permit(now: start, inFlight: 0) == .send(16))
        #expect(gate.permit(now: start, inFlight: 10) == .send(6))
        #expect(gate.permit(now: start, inFlight: 16) == .full)
    }

    @Test func aFailureClosesTheGateThenOneProbeAtATimeUntilASuccess() {
        var gate = EndpointGate(concurrency: 16)
        let sent = gate.generation
        gate.record(unavailable, sentIn: sent, now: start, jitter: 1)
        #expect(gate.permit(now: start, inFlight: 0) == .wait(until: start + .seconds(1)))
        // The other requests of the same burst fail too; they do not lengthen the wait.
        for _ in 0..<15 { gate.record(unavailable, sentIn: sent, now: start, jitter: 1) }
        #expect(gate.consecutiveFailures == 1)
        #expect(gate.permit(now: start + .seconds(1), inFlight: 0) == .send(1))
        #expect(gate.permit(now: start + .seconds(1), inFlight: 1) == .full)
        // The probe fails: the wait doubles.
        gate.record(unavailable, sentIn: gate.generation, now: start + .seconds(1), jitter: 1)
        #expect(gate.permit(now: start + .seconds(2), inFlight: 0) == .wait(until: start + .seconds(3)))
        // The next probe succeeds: the gate opens fully.
        gate.record(.delivered(status: 200), sentIn: gate.generation, now: start + .seconds(3), jitter: 1)
        #expect(!gate.isFailing)
        #expect(gate.permit(now: start + .seconds(3), inFlight: 0) == .send(16))
    }

    @Test func retryAfterHoldsTheGateAtLeastThatLong() {
        var gate = EndpointGate(concurrency: 4)
        gate.record(.retryable(status: 429, error: "HTTP 429", retryAfter: .seconds(30)), sentIn: gate.generation, now: start, jitter: 0)
        #expect(gate.permit(now: start + .seconds(29), inFlight: 0) == .wait(until: start + .seconds(30)))
    }

    @Test func aPermanentRefusalMeansTheReceiverIsUp() {
        var gate = EndpointGate(concurrency: 4)
        gate.record(unavailable, sentIn: gate.generation, now: start, jitter: 0)
        gate.record(.permanent(status: 400, error: "HTTP 400"), sentIn: gate.generation, now: start, jitter: 0)
        #expect(gate.permit(now: start, inFlight: 0) == .send(4))
    }
}

extension WebhookRetryTests {
    @Test func anEventHandedOverFromTheJournalIsAsOldAsItsWrite() throws {
        let event = try Event(payload: #"{"id":"1","op":"INSERT","schema":"public","table":"t","pk":null,"new":{"a":1},"old":null,"txid":"1","at":"2026-11-23T12:00:00.000000Z"}"#)
        let now: Int64 = (1_795_435_200 + 90) * 1_000_000_000 // 2026-11-23T12:01:30Z
        #expect(event.age(now: now) == .seconds(90))
        #expect(event.age(now: 0) == .zero)
        #expect(try Event(payload: #"{"id":"1","op":"TRUNCATE","schema":"s","table":"t","txid":"1","at":"soon"}"#).age(now: now) == nil)
    }
}

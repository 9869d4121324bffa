import NIOCore
import Testing
@testable import HeraldHTTP

@Suite struct ConnectionCounterTests {
    let one = try! SocketAddress(ipAddress: "192.0.2.1", port: 40_000)
    let two = try! SocketAddress(ipAddress: "2001:db8::2", port: 40_001)
    let proxy = try! SocketAddress(ipAddress: "127.0.0.1", port: 40_002)

    @Test func oneAddressTakesItsShareOfTheListener() {
        let counter = SocketLimitsHandler.Counter(limit: 10, perAddress: 2, perAddressKey: "http.max_connections_per_address", proxies: ["127.0.0.1"])
        #expect(counter.admit(from: one) == nil)
        #expect(counter.admit(from: one) == nil)
        let refusal = counter.admit(from: one)
        #expect(refusal?.status == .tooManyRequests)
        #expect(refusal?.message == "one address may hold at most 2 connections (http.max_connections_per_address)")
        #expect(counter.admit(from: two) == nil)
        // A proxy stands for many clients. A refused connection counts until it closes: 4 so far.
        for _ in 0..<6 { #expect(counter.admit(from: proxy) == nil) }
        #expect(counter.admit(from: proxy)?.status == .serviceUnavailable, "the listener's own limit still holds")
        counter.release(from: one)
        counter.release(from: one)
        counter.release(from: proxy)
        #expect(counter.admit(from: one) == nil)
    }

    @Test func aUnixSocketPeerHasNoAddressToCount() {
        let counter = SocketLimitsHandler.Counter(limit: 3, perAddress: 1, perAddressKey: "x", proxies: [])
        for _ in 0..<3 { #expect(counter.admit() == nil) }
        #expect(counter.admit()?.status == .serviceUnavailable)
    }
}

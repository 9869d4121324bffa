import ArgumentParser
import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// The writer of the side-by-side scenario (x.): another pub/sub server has no
/// trigger, so events shaped like pgherald's are POSTed to it at a steady rate,
/// on one keep-alive HTTP/1.1 connection over its Unix socket.
struct Publish: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "POST pgherald-shaped events (count, at) to an HTTP publisher on a Unix socket at a steady rate; print how many were accepted."
    )

    @Option(help: "The publisher's Unix socket.")
    var socket: String

    @Option(help: "The path POSTed to.")
    var path = "/pub"

    @Option(help: "Events a second.")
    var rate: Int

    @Option(help: "Seconds to publish for.")
    var seconds: Double

    @Option(help: "Bytes of each event's JSON, padded in its row to match pgherald's frames.")
    var bytes = 230

    func run() throws {
        let descriptor = Glibc.socket(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0)
        guard descriptor >= 0 else { throw ValidationError("socket(): errno \(errno)") }
        defer { close(descriptor) }
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        let pathBytes = Array(socket.utf8)
        guard pathBytes.count < MemoryLayout.size(ofValue: address.sun_path) else { throw ValidationError("--socket is too long") }
        withUnsafeMutableBytes(of: &address.sun_path) { raw in raw.copyBytes(from: pathBytes + [0]) }
        let connected = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(descriptor, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
        }
        guard connected == 0 else { throw ValidationError("cannot connect to \(socket): errno \(errno)") }

        let total = Int(Double(rate) * seconds)
        let start = nowMicroseconds()
        var accepted = 0
        var response = [UInt8](repeating: 0, count: 4096)
        for count in 1...max(total, 1) {
            let due = start + Int64(count - 1) * 1_000_000 / Int64(rate)
            let wait = due - nowMicroseconds()
            if wait > 0 { usleep(UInt32(wait)) }
            let body = Array(event(count: count).utf8)
            let request = Array("POST \(path) HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\nContent-Length: \(body.count)\r\n\r\n".utf8) + body
            guard writeAll(descriptor, request) else { throw ValidationError("the publisher closed the connection after \(accepted) events") }
            guard let status = readResponse(descriptor, into: &response) else { throw ValidationError("no answer to event \(count)") }
            if (200..<300).contains(status) { accepted += 1 }
        }
        print(accepted)
    }

    /// `{"id":"N","count":N,…,"row":{"id":N,"payload":"xxx…"},"at":"…"}`, `at` last as pgherald writes it.
    private func event(count: Int) -> String {
        let now = nowMicroseconds()
        var seconds = time_t(now / 1_000_000)
        var parts = tm()
        gmtime_r(&seconds, &parts)
        var text = [CChar](repeating: 0, count: 32)
        strftime(&text, text.count, "%Y-%m-%dT%H:%M:%S", &parts)
        let stamp = String(cString: text) + "." + String(String(now % 1_000_000 + 1_000_000).dropFirst()) + "Z"
        let head = #"{"id":"\#(count)","count":\#(count),"op":"INSERT","table":"public.bench_event","txid":"\#(count)","row":{"id":\#(count),"payload":""#
        let tail = #""},"at":"\#(stamp)"}"#
        return head + String(repeating: "x", count: max(bytes - head.utf8.count - tail.utf8.count, 0)) + tail
    }

    private func writeAll(_ descriptor: Int32, _ bytes: [UInt8]) -> Bool {
        var sent = 0
        while sent < bytes.count {
            let written = bytes[sent...].withUnsafeBytes { write(descriptor, $0.baseAddress, $0.count) }
            guard written > 0 else { return false }
            sent += written
        }
        return true
    }

    /// Reads one response with a Content-Length body; returns its status.
    private func readResponse(_ descriptor: Int32, into buffer: inout [UInt8]) -> Int? {
        var received: [UInt8] = []
        while true {
            let read = buffer.withUnsafeMutableBytes { Glibc.read(descriptor, $0.baseAddress, $0.count) }
            guard read > 0 else { return nil }
            received += buffer[..<read]
            let text = String(decoding: received, as: UTF8.self)
            guard let headEnd = text.range(of: "\r\n\r\n") else { continue }
            let head = text[..<headEnd.lowerBound]
            let length = head.split(separator: "\r\n").first { $0.lowercased().hasPrefix("content-length:") }
                .flatMap { Int($0.split(separator: ":")[1].trimmingCharacters(in: .whitespaces)) } ?? 0
            guard text.utf8.count - text[..<headEnd.upperBound].utf8.count >= length else { continue }
            return head.split(separator: " ").dropFirst().first.flatMap { Int($0) }
        }
    }
}

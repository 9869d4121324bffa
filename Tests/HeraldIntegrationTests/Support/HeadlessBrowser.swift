import Foundation
import Herald
import Synchronization
import Testing

/// Headless Chromium, driven over the DevTools protocol on a pipe
/// (`--remote-debugging-pipe`: commands in on descriptor 3, answers and
/// events out on 4, each message ending in a NUL byte), so that no port is opened.
final class HeadlessBrowser: Sendable {
    struct Failure: Error, CustomStringConvertible {
        let description: String
    }

    private struct State {
        var pending: [UInt8] = []
        /// Answers by command id.
        var answers: [Int: JSONObject] = [:]
        /// Events, in order: `method`, `params`, and `sessionId` when a page sent it.
        var events: [JSONObject] = []
        var nextID = 1
        var ended = false
    }

    private let processID: pid_t
    private let commands: Int32
    private let profile: URL
    /// What the reading thread and the tests share.
    private final class Inbox: Sendable {
        let state = Mutex(State())
    }

    private let inbox = Inbox()

    /// Chromium from `PGHERALD_TEST_CHROMIUM` (which `scripts/test` sets), else `chromium` on the PATH.
    /// - Parameter extraArguments: more flags, such as `--ignore-certificate-errors` for a test CA.
    init(extraArguments: [String] = []) throws {
        let executable = ProcessInfo.processInfo.environment["PGHERALD_TEST_CHROMIUM"] ?? "/usr/bin/chromium"
        guard FileManager.default.isExecutableFile(atPath: executable) else {
            throw Failure(description: "no Chromium at \(executable): scripts/test installs Debian's chromium and sets PGHERALD_TEST_CHROMIUM")
        }
        profile = FileManager.default.temporaryDirectory.appending(path: "pgherald-chromium-\(UUID().uuidString.prefix(8))")
        var toBrowser: [Int32] = [0, 0]
        var fromBrowser: [Int32] = [0, 0]
        guard pipe(&toBrowser) == 0, pipe(&fromBrowser) == 0 else { throw Failure(description: "pipe: \(errno)") }
        // Only the two copies made for the browser may reach it.
        for descriptor in toBrowser + fromBrowser { _ = fcntl(descriptor, F_SETFD, FD_CLOEXEC) }
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        // dup2 clears close-on-exec: the browser keeps exactly these two.
        posix_spawn_file_actions_adddup2(&actions, toBrowser[0], 3)
        posix_spawn_file_actions_adddup2(&actions, fromBrowser[1], 4)
        posix_spawn_file_actions_addopen(&actions, 2, "/dev/null", O_WRONLY, 0)
        let arguments = [
            executable, "--headless", "--no-sandbox", "--disable-gpu", "--remote-debugging-pipe", "--no-first-run",
            "--disable-extensions", "--disable-background-networking", "--user-data-dir=\(profile.path)",
        ] + extraArguments + ["about:blank"]
        var argv = arguments.map { strdup($0) } + [nil]
        defer { for pointer in argv { free(pointer) } }
        var pid: pid_t = 0
        let spawned = posix_spawn(&pid, executable, &actions, nil, &argv, environ)
        close(toBrowser[0])
        close(fromBrowser[1])
        guard spawned == 0 else { throw Failure(description: "cannot start \(executable): \(String(cString: strerror(spawned)))") }
        processID = pid
        commands = toBrowser[1]
        let events = fromBrowser[0]
        let inbox = self.inbox
        Thread.detachNewThread {
            var buffer = [UInt8](repeating: 0, count: 65_536)
            while true {
                let count = read(events, &buffer, buffer.count)
                guard count > 0 else { break }
                inbox.state.withLock { state in
                    state.pending += buffer[0..<count]
                    while let end = state.pending.firstIndex(of: 0) {
                        let message = Array(state.pending[..<end])
                        state.pending.removeSubrange(...end)
                        guard let object = (try? JSONParser.parse(message))?.objectValue else { continue }
                        if case .number(let id)? = object["id"], let number = id.int64Value {
                            state.answers[Int(number)] = object
                        } else {
                            state.events.append(object)
                        }
                    }
                }
            }
            close(events)
            inbox.state.withLock { $0.ended = true }
        }
    }

    deinit {
        kill(processID, SIGKILL)
        var status: Int32 = 0
        waitpid(processID, &status, 0)
        close(commands)
        try? FileManager.default.removeItem(at: profile)
    }

    /// Sends one command and waits for its answer's `result`.
    @discardableResult
    func send(_ method: String, _ parameters: JSONObject = [:], session: String? = nil, within seconds: Double = 15) async throws -> JSONObject {
        let id = inbox.state.withLock { state in
            defer { state.nextID += 1 }
            return state.nextID
        }
        var message: JSONObject = ["id": .number(JSONNumber(Int64(id))), "method": .string(method), "params": .object(parameters)]
        if let session { message["sessionId"] = .string(session) }
        var writer = JSONWriter()
        writer.write(.object(message))
        let bytes = writer.bytes + [0]
        let written = bytes.withUnsafeBytes { write(commands, $0.baseAddress, $0.count) }
        guard written == bytes.count else { throw Failure(description: "the browser stopped reading commands") }
        let deadline = ContinuousClock.now + .seconds(seconds)
        while ContinuousClock.now < deadline {
            let (answer, ended) = inbox.state.withLock { ($0.answers.removeValue(forKey: id), $0.ended) }
            if let answer {
                if let error = answer["error"] { throw Failure(description: "\(method) failed: \(error)") }
                return answer["result"]?.objectValue ?? [:]
            }
            if ended { throw Failure(description: "the browser exited during \(method)") }
            try await Task.sleep(for: .milliseconds(10))
        }
        throw Failure(description: "\(method) had no answer within \(seconds) s")
    }

    /// A new tab showing `url`, once its load event has fired.
    func open(_ url: String) async throws -> BrowserPage {
        let target = try await send("Target.createTarget", ["url": .string("about:blank")])
        guard let targetID = target["targetId"]?.stringValue else { throw Failure(description: "no target id") }
        let attached = try await send("Target.attachToTarget", ["targetId": .string(targetID), "flatten": .bool(true)])
        guard let session = attached["sessionId"]?.stringValue else { throw Failure(description: "no session id") }
        let page = BrowserPage(browser: self, session: session)
        for domain in ["Runtime", "Page", "Log"] { try await send("\(domain).enable", session: session) }
        try await page.navigate(url)
        return page
    }

    /// The events a page's session sent so far.
    func events(of session: String) -> [JSONObject] {
        inbox.state.withLock { $0.events.filter { $0["sessionId"]?.stringValue == session } }
    }
}

/// One tab of a ``HeadlessBrowser``.
struct BrowserPage: Sendable {
    let browser: HeadlessBrowser
    let session: String

    func navigate(_ url: String) async throws {
        let before = browser.events(of: session).count { $0["method"]?.stringValue == "Page.loadEventFired" }
        try await browser.send("Page.navigate", ["url": .string(url)], session: session)
        try await waitFor(seconds: 15) {
            browser.events(of: session).count { $0["method"]?.stringValue == "Page.loadEventFired" } > before
        } failure: { "\(url) did not load" }
    }

    /// Runs `expression` in the page (a promise is awaited) and returns its value.
    @discardableResult
    func evaluate(_ expression: String) async throws -> JSONValue {
        let answer = try await browser.send(
            "Runtime.evaluate", ["expression": .string(expression), "awaitPromise": .bool(true), "returnByValue": .bool(true)], session: session
        )
        if let exception = answer["exceptionDetails"] { throw HeadlessBrowser.Failure(description: "\(expression) threw: \(exception)") }
        return answer["result"]?["value"] ?? .null
    }

    /// Waits until `expression` is true in the page.
    func waitUntil(_ expression: String, within seconds: Double = 10) async throws {
        try await waitFor(seconds: seconds) {
            try await evaluate(expression) == .bool(true)
        } failure: { "never true in the page: \(expression)" }
    }

    func text(_ selector: String) async throws -> String {
        try await evaluate("document.querySelector(\(quoted(selector)))?.textContent ?? ''").stringValue ?? ""
    }

    /// What went wrong in the page: uncaught exceptions, `console.error`, and errors the browser logged (failed loads among them).
    var errors: [String] {
        browser.events(of: session).compactMap { event -> String? in
            switch event["method"]?.stringValue {
            case "Runtime.exceptionThrown": return "exception: \(event["params"]?["exceptionDetails"] ?? .null)"
            case "Runtime.consoleAPICalled" where event["params"]?["type"]?.stringValue == "error":
                return "console.error: \(event["params"]?["args"] ?? .null)"
            case "Log.entryAdded" where event["params"]?["entry"]?["level"]?.stringValue == "error":
                return "log: \(event["params"]?["entry"]?["text"]?.stringValue ?? "")"
            default: return nil
            }
        }
    }

    /// The viewport, in CSS pixels: 390 × 844 and `mobile` is a phone's.
    func setViewport(width: Int, height: Int, mobile: Bool = false) async throws {
        try await browser.send("Emulation.setDeviceMetricsOverride", [
            "width": .number(JSONNumber(Int64(width))), "height": .number(JSONNumber(Int64(height))),
            "deviceScaleFactor": .number(JSONNumber(mobile ? 2 : 1)), "mobile": .bool(mobile),
        ], session: session)
    }

    /// A PNG of the whole page.
    func screenshot() async throws -> Data {
        let shot = try await browser.send("Page.captureScreenshot", ["format": .string("png"), "captureBeyondViewport": .bool(true)], session: session)
        guard let base64 = shot["data"]?.stringValue, let data = Data(base64Encoded: base64) else {
            throw HeadlessBrowser.Failure(description: "no screenshot")
        }
        return data
    }

    /// `text` as a JavaScript string literal.
    func quoted(_ text: String) -> String {
        var writer = JSONWriter()
        writer.write(string: text)
        return String(decoding: writer.bytes, as: UTF8.self)
    }
}

import ArgumentParser
import Foundation
import Herald
import HeraldClient
import HeraldEventLog
import HeraldService

struct Tail: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Print live events from a running daemon.",
        discussion: """
            Connects to the daemon's socket and prints events as they commit: readable lines on a \
            terminal, JSON lines (the shared event shape) otherwise. When the daemon restarts, tail \
            reconnects by itself and says so on stderr. If the daemon cannot be reached at the start, \
            tail says why and exits with status 69, unless --retry asks it to keep trying.

            With --log PATH it reads the event log instead (no daemon needed): the events the file \
            holds, then with -f the ones appended later, following it across rotations as tail -F \
            does. --since ID starts after that event, looking through the rotated files too.
            """
    )

    /// sysexits.h's EX_UNAVAILABLE: the daemon could not be reached.
    static let unavailableExitCode: Int32 = 69

    enum Format: String, ExpressibleByArgument, CaseIterable {
        case pretty, json
    }

    @OptionGroup var socket: DaemonSocketOptions
    @OptionGroup var filterOptions: FilterOptions

    @Option(help: "pretty or json. Default: pretty on a terminal, json otherwise.")
    var format: Format?

    @Flag(help: "Keep trying while the daemon cannot be reached at the start, with a status line on stderr, instead of exiting.")
    var retry = false

    @Option(help: ArgumentHelp("Read this event log (event_log.path) instead of the socket.", valueName: "path"))
    var log: String?

    @Flag(name: [.customShort("f"), .customLong("follow")], help: "With --log: keep printing events as they are appended, across rotations.")
    var follow = false

    @Option(help: ArgumentHelp("With --log: start after the event with this id.", valueName: "id"))
    var since: String?

    func validate() throws {
        _ = try filterOptions.filter()
        if log == nil, follow || since != nil {
            throw ValidationError("-f and --since read an event log; give it with --log PATH (the socket stream is always live)")
        }
    }

    func run() async throws {
        let terminal = isatty(STDOUT_FILENO) == 1
        let formatter = PrettyEventFormatter(colour: terminal && ProcessInfo.processInfo.environment["NO_COLOR"] == nil)
        let pretty = (format ?? (terminal ? .pretty : .json)) == .pretty
        let filter = try filterOptions.filter()
        let printEvent = { (event: Event) in
            // Written at once, so a pipe sees each event as it arrives.
            FileHandle.standardOutput.write(Data(((pretty ? formatter.line(for: event) : event.jsonText) + "\n").utf8))
        }
        if let log {
            try await readLog(log, filter: filter, printEvent: printEvent)
            return
        }
        let socketPath = try await socket.path()
        let client = HeraldClient(socketPath: socketPath)
        var connected = false
        var lastProblem: String?
        for try await message in client.messages(filter) {
            switch message {
            case .event(let event):
                printEvent(event)
            case .transaction(let group):
                group.events.forEach(printEvent)
            case .reconnected where !connected:
                Self.status("connected to \(socketPath)")
            case .reconnected:
                Self.status("reconnected to \(socketPath); resuming after the last event")
            case .reset(let reason):
                Self.status("could not resume, events were missed: \(reason)")
            case .unreachable(let error):
                guard connected || retry else {
                    FileHandle.standardError.write(Data("Error: \(error)\n".utf8))
                    throw ExitCode(Self.unavailableExitCode)
                }
                // Once per distinct problem, not once per attempt.
                if error.message != lastProblem { Self.status("\(error); retrying") }
                lastProblem = error.message
                continue
            }
            connected = true
            lastProblem = nil
        }
    }

    /// Prints the log's events (after `--since`, through the rotated files), then follows it with `-f`.
    private func readLog(_ path: String, filter: EventFilter, printEvent: (Event) -> Void) async throws {
        var waitingFor = since
        let earlier = since == nil ? [] : EventLogReader.rotatedGenerations(of: path)
        var reader = EventLogReader(path: path)
        for file in earlier + [path] {
            reader = EventLogReader(path: file)
            for line in try reader.readAvailable() {
                guard let event = try? Event(payload: line) else { continue }
                if let id = waitingFor {
                    if event.id == id { waitingFor = nil }
                    continue
                }
                if filter.matches(event) { printEvent(event) }
            }
        }
        if let waitingFor {
            Self.status("event \(waitingFor) is not in \(path) or its rotated files; nothing printed")
            throw ExitCode(1)
        }
        guard follow else { return }
        while !Task.isCancelled {
            let lines = try reader.readAvailable()
            for line in lines {
                if let event = try? Event(payload: line), filter.matches(event) { printEvent(event) }
            }
            if lines.isEmpty { try await Task.sleep(for: .milliseconds(100)) }
        }
    }

    private static func status(_ line: String) {
        FileHandle.standardError.write(Data("pgherald tail: \(line)\n".utf8))
    }
}

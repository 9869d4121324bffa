import ArgumentParser
import Foundation
import Herald
import HeraldClient
import HeraldServer

struct Tail: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Print live events from a running daemon.",
        discussion: """
            Connects to the daemon's socket and prints events as they commit: readable lines on a \
            terminal, JSON lines (the shared event shape) otherwise. When the daemon restarts, tail \
            reconnects by itself and says so on stderr. If the daemon cannot be reached at the start, \
            tail says why and exits with status 69, unless --retry asks it to keep trying.
            """
    )

    /// sysexits.h's EX_UNAVAILABLE: the daemon could not be reached.
    static let unavailableExitCode: Int32 = 69

    enum Format: String, ExpressibleByArgument, CaseIterable {
        case pretty, json
    }

    @OptionGroup var socket: SocketPathOption
    @OptionGroup var filterOptions: FilterOptions

    @Option(help: "pretty or json. Default: pretty on a terminal, json otherwise.")
    var format: Format?

    @Flag(help: "Keep trying while the daemon cannot be reached at the start, with a status line on stderr, instead of exiting.")
    var retry = false

    func validate() throws {
        _ = try filterOptions.filter()
    }

    func run() async throws {
        let client = HeraldClient(socketPath: socket.path)
        let terminal = isatty(STDOUT_FILENO) == 1
        let formatter = PrettyEventFormatter(colour: terminal && ProcessInfo.processInfo.environment["NO_COLOR"] == nil)
        let pretty = (format ?? (terminal ? .pretty : .json)) == .pretty
        var connected = false
        var lastProblem: String?
        for try await message in client.messages(try filterOptions.filter()) {
            switch message {
            case .event(let event):
                // Written at once, so a pipe sees each event as it arrives.
                FileHandle.standardOutput.write(Data(((pretty ? formatter.line(for: event) : event.jsonText) + "\n").utf8))
            case .reconnected where !connected:
                Self.status("connected to \(socket.path)")
            case .reconnected:
                Self.status("reconnected to \(socket.path); resuming after the last event")
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

    private static func status(_ line: String) {
        FileHandle.standardError.write(Data("pgherald tail: \(line)\n".utf8))
    }
}

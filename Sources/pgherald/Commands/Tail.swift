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
            reconnects by itself and says so on stderr.
            """
    )

    enum Format: String, ExpressibleByArgument, CaseIterable {
        case pretty, json
    }

    @OptionGroup var socket: SocketPathOption
    @OptionGroup var filterOptions: FilterOptions

    @Option(help: "pretty or json. Default: pretty on a terminal, json otherwise.")
    var format: Format?

    func validate() throws {
        _ = try filterOptions.filter()
    }

    func run() async throws {
        let client = HeraldClient(socketPath: socket.path)
        let terminal = isatty(STDOUT_FILENO) == 1
        let formatter = PrettyEventFormatter(colour: terminal && ProcessInfo.processInfo.environment["NO_COLOR"] == nil)
        let pretty = (format ?? (terminal ? .pretty : .json)) == .pretty
        for try await message in client.messages(try filterOptions.filter()) {
            switch message {
            case .event(let event):
                // Written at once, so a pipe sees each event as it arrives.
                FileHandle.standardOutput.write(Data(((pretty ? formatter.line(for: event) : event.jsonText) + "\n").utf8))
            case .reconnected:
                FileHandle.standardError.write(Data("pgherald tail: reconnected to \(socket.path); resuming after the last event\n".utf8))
            case .reset(let reason):
                FileHandle.standardError.write(Data("pgherald tail: could not resume, events were missed: \(reason)\n".utf8))
            }
        }
    }
}

public import ArgumentParser
import Foundation
public import HeraldConfiguration

struct CheckConfig: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "check-config",
        abstract: "Check the configuration as serve would, without connecting, and print it.",
        discussion: """
            Reads the file (default \(ConfigurationSources.defaultFile)) and the PGHERALD_* environment \
            variables, checks every setting (types, ranges, unknown keys, unreadable secret files) and \
            prints each one in force with where it came from; passwords are masked. Exits 0 when serve \
            would start with it, and 78 (EX_CONFIG) naming the key, its source and the problem otherwise.
            """
    )

    @Argument(help: ArgumentHelp("The configuration file.", valueName: "file"))
    var file: String?

    func run() async throws {
        let path = file ?? ConfigurationSources.defaultFile
        let configuration = try await DaemonConfiguration.loadOrExit(from: ConfigurationSources(
            file: path, fileRequired: file != nil, environment: ProcessInfo.processInfo.environment
        ))
        if !FileManager.default.fileExists(atPath: path) {
            print("# no file at \(path): defaults and PGHERALD_* variables apply")
        }
        print(configuration.rendered)
        for warning in configuration.warnings {
            FileHandle.standardError.write(Data("warning: \(warning)\n".utf8))
        }
    }
}

extension DaemonConfiguration {
    /// Loads the configuration, or prints the problem and exits with 78 (EX_CONFIG).
    static func loadOrExit(from sources: ConfigurationSources) async throws -> DaemonConfiguration {
        do {
            return try await load(from: sources)
        } catch {
            FileHandle.standardError.write(Data("Error: configuration: \(error)\n".utf8))
            throw ExitCode(ConfigurationError.exitCode)
        }
    }
}

extension DaemonConfiguration.StdoutChoice: ExpressibleByArgument {}

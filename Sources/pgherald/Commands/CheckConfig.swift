public import ArgumentParser
import Foundation
import Herald
import HeraldAPI
import HeraldCluster
public import HeraldConfiguration
import HeraldNATSOutput
import HeraldPostgres
import HeraldService
import HeraldSettings
import HeraldWebhooks
import Logging

struct CheckConfig: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "check-config",
        abstract: "Check the configuration as serve would, without connecting, and print it.",
        discussion: """
            Reads the file (default \(ConfigurationSources.defaultFile)) and the PGHERALD_* environment \
            variables, checks every setting (types, ranges, unknown keys, unreadable secret files) and \
            prints each one in force with where it came from; passwords are masked. Exits 0 when serve \
            would start with it, and 78 (EX_CONFIG) naming the key, its source and the problem otherwise. \
            With --connect it also connects to the listener's database (listen_database, else database) \
            and says how that connection reaches PostgreSQL; a pooler in transaction or statement mode, \
            which serve refuses, exits 78 too. It also checks each live query (queries:) against \
            database: it parses as one read-only query, uses exactly the params it declares, has its key \
            columns, and (without params) its key is unique in its result now; it prints the tables \
            each one reads. A query that fails exits 78, and so does a webhook filter that names a table or \
            column the database does not have. The daemon's role must be able to do in the pgherald \
            schema what serve does there (own it, or be granted it by install --daemon-role), and to \
            SET ROLE to each role that rls: true checks as. Each NATS client (nats:, cluster:) must reach a \
            server of its list with its credentials, and an edge's stream (cluster.stream) must exist.
            """
    )

    @Argument(help: ArgumentHelp("The configuration file.", valueName: "file"))
    var file: String?

    @Flag(help: "Also connect to the listener's database and check that LISTEN can work there (no transaction-mode pooler), the daemon role's rights, each live query against database, and each NATS server list and stream. Default: no connection.")
    var connect = false

    @Flag(help: "List every setting, also those of sections where every key has its default. Default: such sections are named in one line.")
    var all = false

    func run() async throws {
        let path = file ?? ConfigurationSources.defaultFile
        let sources = ConfigurationSources(file: path, fileRequired: file != nil, environment: ProcessInfo.processInfo.environment)
        let configuration = try await DaemonConfiguration.loadOrExit(from: sources)
        if !FileManager.default.fileExists(atPath: path) {
            print("# no file at \(path): defaults and PGHERALD_* variables apply")
        }
        print(configuration.rendered(all: all))
        // The warnings come after the listing, also where stdout is a pipe and would be written at exit.
        fflush(nil)
        for warning in configuration.warnings {
            FileHandle.standardError.write(Data("warning: \(warning)\n".utf8))
        }
        if let file = configuration.fileNamingNoDatabase(sources) {
            FileHandle.standardError.write(Data("warning: \(DaemonConfiguration.notSetUp(file)); serve refuses to start (exit 78) until it does\n".utf8))
        }
        guard connect else { return }
        let listenerDatabase = configuration.listenDatabase ?? configuration.database
        let route: SessionRoute
        let serverPID: Int32
        do {
            (route, serverPID) = try SessionRoute.detect(listenerDatabase, timeout: configuration.connectTimeout)
        } catch {
            FileHandle.standardError.write(Data("Error: listener: \(error)\n".utf8))
            throw ExitCode(ConfigurationError.exitCode)
        }
        switch route {
        case .direct:
            print("# listener: connects straight to PostgreSQL (\(listenerDatabase))")
        case .sessionPooler:
            print("# listener: connects through a session-mode pooler, which keeps LISTEN's session (\(listenerDatabase))")
        case .transactionPooler:
            FileHandle.standardError.write(Data("Error: listener: \(SessionRoute.sharedSessionMessage(endpoint: "\(listenerDatabase)", serverPID: serverPID))\n".utf8))
            throw ExitCode(ConfigurationError.exitCode)
        }
        // Reported with what follows, so that one run names every grant to make.
        let daemonRoleFailed = configuration.source == .database && !checkDaemonRole(on: configuration.database, timeout: configuration.connectTimeout)
        if let queries = configuration[LiveQueryOutput.self] {
            try checkQueries(queries.definitions, on: configuration.database, timeout: configuration.connectTimeout)
        }
        if let endpoints = configuration[WebhookService.self], !endpoints.isEmpty {
            try await checkWebhookFilters(endpoints, on: configuration.database)
        }
        let roles = configuration.rowSecurityRoles
        if !roles.isEmpty {
            try checkRowSecurityRoles(roles, on: configuration.database, timeout: configuration.connectTimeout)
        }
        for client in natsClients(of: configuration) {
            do {
                print("# \(client.key): \(try await client.check(version: PGHerald.configuration.version))")
            } catch let waiting as NATSReachability.Waiting {
                FileHandle.standardError.write(Data("warning: \(waiting)\n".utf8))
            } catch {
                FileHandle.standardError.write(Data("Error: \(error)\n".utf8))
                throw ExitCode(ConfigurationError.exitCode)
            }
        }
        if daemonRoleFailed { throw ExitCode(ConfigurationError.exitCode) }
    }

    /// Each NATS client serve would start, with the stream it needs.
    private func natsClients(of configuration: DaemonConfiguration) -> [NATSReachability] {
        var clients: [NATSReachability] = []
        if let nats = configuration[NATSOutput.self] {
            clients.append(NATSReachability(
                key: "nats.servers", client: "the NATS output", servers: nats.servers, authentication: nats.authentication, tls: nats.tls,
                stream: (nats.stream, nats.createStream)
            ))
        }
        if let cluster = configuration[ClusterLink.self] {
            if configuration.source == .nats, let stream = cluster.stream {
                clients.append(NATSReachability(
                    key: "cluster.nats", client: "the edge", servers: cluster.servers, authentication: cluster.authentication, tls: cluster.tls,
                    stream: (stream, false)
                ))
            }
            clients.append(NATSReachability(
                key: "cluster.nats", client: "the cluster", servers: cluster.servers, authentication: cluster.authentication, tls: cluster.tls
            ))
        }
        return clients
    }

    /// Checks that the daemon's role may do in the pgherald schema what serve does there; false
    /// when it may not, said on standard error.
    private func checkDaemonRole(on database: ConnectionString, timeout: Duration) -> Bool {
        let problem: String?
        do {
            let connection = try LibpqConnection.connect(database, timeout: timeout, applicationName: "pgherald check-config")
            problem = try Installer.daemonRoleProblem(on: connection)
        } catch {
            FileHandle.standardError.write(Data("Error: database: cannot check the daemon's role: \(error)\n".utf8))
            return false
        }
        if let problem {
            FileHandle.standardError.write(Data("Error: database: \(problem)\n".utf8))
            return false
        }
        print("# database: the daemon's role may read the journal and keep its cursors in the pgherald schema")
        return true
    }

    /// Checks that the daemon's role may SET ROLE to each role `rls: true` checks as.
    private func checkRowSecurityRoles(_ roles: Set<String>, on database: ConnectionString, timeout: Duration) throws {
        let problems: [RowSecurityRoleCheck.Problem]
        do {
            let connection = try LibpqConnection.connect(database, timeout: timeout, applicationName: "pgherald check-config")
            problems = try RowSecurityRoleCheck.problems(with: roles, on: connection)
        } catch {
            FileHandle.standardError.write(Data("Error: rls: cannot check the roles in database: \(error)\n".utf8))
            throw ExitCode(ConfigurationError.exitCode)
        }
        for problem in problems {
            FileHandle.standardError.write(Data("\(problem.isError ? "Error" : "warning"): rls: \(problem)\n".utf8))
        }
        if problems.contains(where: \.isError) { throw ExitCode(ConfigurationError.exitCode) }
        print("# rls: the daemon may check as \(roles.sorted().joined(separator: ", "))")
    }

    /// Checks each webhook endpoint's filter against database, as serve does at start.
    private func checkWebhookFilters(_ endpoints: [WebhookEndpoint], on database: ConnectionString) async throws {
        let catalog = SchemaCatalog(connection: database, logger: Logger(label: "pgherald.check-config"))
        let problem: WebhookService.FilterProblem?
        do {
            problem = try await WebhookService.filterProblem(in: endpoints, catalog: catalog)
        } catch {
            FileHandle.standardError.write(Data("Error: webhooks: cannot read the tables of database: \(error)\n".utf8))
            throw ExitCode(ConfigurationError.exitCode)
        }
        if let problem {
            FileHandle.standardError.write(Data("Error: \(problem)\n".utf8))
            throw ExitCode(ConfigurationError.exitCode)
        }
        print("# webhooks: the filters of \(endpoints.count) endpoint\(endpoints.count == 1 ? "" : "s") match the database's tables")
    }

    /// Inspects each query, and runs those without parameters to check that their key is unique.
    private func checkQueries(_ definitions: [LiveQueryDefinition], on database: ConnectionString, timeout: Duration) throws {
        let connection: LibpqConnection
        do {
            connection = try LibpqConnection.connect(database, timeout: timeout, applicationName: "pgherald check-config")
        } catch {
            FileHandle.standardError.write(Data("Error: queries: cannot connect to database: \(error)\n".utf8))
            throw ExitCode(ConfigurationError.exitCode)
        }
        for definition in definitions {
            do {
                let inspection = try LiveQueryRunner.inspect(definition, on: connection)
                if definition.parameters.isEmpty {
                    let read = try LiveQueryRunner.evaluate(definition, parameters: [], on: connection)
                    _ = try LiveQueryResult(
                        query: definition.name, version: 1, generation: "check", snapshot: read.snapshot, rows: read.rows, keyColumns: definition.key
                    )
                }
                let tables = inspection.tables.map(\.description).joined(separator: ", ")
                print("# query \(definition.name): reads \(tables.isEmpty ? "no table (it never runs again: set tables:)" : tables)")
            } catch {
                FileHandle.standardError.write(Data("Error: queries.\(definition.name): \(error)\n".utf8))
                throw ExitCode(ConfigurationError.exitCode)
            }
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

extension StdoutChoice: ExpressibleByArgument {}

import Foundation
import Herald
import HeraldHTTP
import HeraldOutput
import HeraldPostgres
import HeraldService
import Hummingbird
import NIOCore
import ServiceLifecycle

extension SocketServer {
    /// `/stats`, `/healthz` and `/metrics`. Over the network, `/stats` and
    /// `/metrics` answer only a viewer with the operator's right.
    func addRoutes(to router: Router<SocketRequestContext>) {
        router.get("stats") { request, context in
            let scope: AccessScope
            switch await self.statisticsScope(of: request.head, channel: context.channel) {
            case .success(let found): scope = found
            case .failure(let refusal): return Response.json(refusal.status, refusal.body)
            }
            var statistics = self.statistics(journal: await self.maintenance?.statistics(maximumAge: .seconds(2)), visibleTo: scope)
            await self.narrowQueries(&statistics, to: scope)
            return self.jsonResponse(.ok, statistics)
        }
        router.get("healthz") { _, _ in
            var listener = self.listenerState()
            let degraded = self.outputs.reports.compactMapValues { $0.statistics.health == "degraded" ? $0.statistics.reason ?? "degraded" : nil }
            if !degraded.isEmpty { listener.degraded = degraded }
            return self.jsonResponse(listener.state == "listening" && self.outputs.starting.isEmpty ? .ok : .serviceUnavailable, listener)
        }
        if let metrics {
            router.get("metrics") { request, context in
                let scope: AccessScope
                switch await self.statisticsScope(of: request.head, channel: context.channel) {
                case .success(let found): scope = found
                case .failure(let refusal): return Response.json(refusal.status, refusal.body)
                }
                return metrics.response(journal: await self.maintenance?.statistics(maximumAge: .seconds(2)), visibleTo: scope)
            }
        }
    }

    /// What `/stats` and `/metrics` may show the asker: on the socket, what
    /// the peer's grant covers; over the network, everything to the
    /// operator's key (`console.key`) and nothing to anyone else.
    func statisticsScope(of head: HTTPRequest, channel: any Channel) async -> Result<AccessScope, StreamRefusal> {
        guard Self.isNetworkListener(channel) else { return .success(await scope(of: channel)) }
        switch networkViewer(presenting: Self.presentedToken(head)) {
        case .success(let viewer) where viewer.mayControl:
            return .success(.everything)
        case .success(let viewer):
            metrics?.recordRefusal(status: 403)
            logger.notice("refused statistics over the network to a viewer without the operator's key", metadata: ["viewer": "\(viewer.name)"])
            return .failure(StreamRefusal(status: .forbidden, body: ErrorBody(
                code: "operator_only", message: "over the network, /stats and /metrics answer only the operator's key (console.key)"
            )))
        case .failure(let refusal):
            return .failure(refusal)
        }
    }

    /// - Parameter scope: per-table figures are given only for the tables it covers.
    func statistics(journal: DaemonStatistics.Journal?, visibleTo scope: AccessScope = .everything) -> DaemonStatistics {
        let broker = self.broker.statistics
        var statistics = DaemonStatistics(
            version: version,
            changeCount: broker.changeCount,
            // Two tables whose names only look alike are one key of a String dictionary: their counts add up.
            tables: Dictionary(broker.tableCounts.filter { scope.covers($0.key) }.map { ($0.key.description, $0.value) }, uniquingKeysWith: +),
            subscribers: broker.subscribersByKind.merging(rowSecurity?.subscribersByKind ?? [:], uniquingKeysWith: +),
            // A stream under row-level security reads its cohort's broker, which counts its overflows.
            overflows: broker.overflowCount + (rowSecurity?.overflowCount ?? 0),
            uptimeSeconds: (ContinuousClock.now - started) / .seconds(1),
            listener: listenerState(),
            durability: health.durability?.rawValue,
            journal: journal,
            outputs: outputs.reports.mapValues(\.statistics)
        )
        if case let replays = self.journal.statistics, replays.resumes > 0 { statistics.replays = replays }
        if let rowSecurity = rowSecurity?.currentStatistics, rowSecurity.cohorts > 0 || rowSecurity.batches > 0 {
            statistics.rowSecurity = rowSecurity
        }
        for output in outputs.all { output.contribute(to: &statistics) }
        return statistics
    }

    /// Leaves out the live queries `scope` may not subscribe to, as `/queries/NAME` would refuse them.
    func narrowQueries(_ statistics: inout DaemonStatistics, to scope: AccessScope) async {
        guard scope != .everything, let queries = statistics.queries, let engine = outputs.first(LiveQueryOutput.self)?.engine else { return }
        var visible: [String: LiveQueryStatistics] = [:]
        for (name, figures) in queries {
            guard let tables = try? await engine.tables(of: name),
                  scope.refusal(ofQuery: name, reading: tables, runsAsSubscriber: engine.definitions[name]?.runsAsSubscriber ?? false) == nil
            else { continue }
            visible[name] = figures
        }
        statistics.queries = visible
    }

    func listenerState() -> DaemonStatistics.Listener {
        let status = health.status
        let feed = health.position
        let reason: String? = switch status {
        case .notStarted, .connecting: feed == nil ? "connecting to PostgreSQL" : "connecting to NATS"
        case .catchingUp: feed == nil ? "replaying events committed while not listening" : "reading the stream's backlog"
        case .listening: Self.reason(starting: outputs.starting)
        case .reconnecting(let attempt, let lastError): "attempt \(attempt): \(lastError)"
        case .stopped: "the listener has stopped"
        }
        return .init(state: status.name, reason: reason, source: feed?.source, streamSequence: feed?.position, streamLag: feed?.lag)
    }

    /// While the listener listens: which outputs are still starting, if any.
    private static func reason(starting: [String]) -> String? {
        starting.isEmpty ? nil : "outputs starting: \(starting.joined(separator: ", "))"
    }

    func jsonResponse(_ status: HTTPResponse.Status, _ body: some Encodable) -> Response {
        Response.json(status, body)
    }
}

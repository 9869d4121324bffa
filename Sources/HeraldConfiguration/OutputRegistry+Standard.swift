import HeraldAPI
import HeraldCluster
import HeraldEventLog
import HeraldNATSOutput
public import HeraldOutput
import HeraldService
import HeraldSupabase
import HeraldWebhooks

extension OutputRegistry {
    /// Every kind of output pgherald has, in the order `serve` builds them:
    /// the cluster link before the Supabase endpoint, which it serves, and both and live queries before the socket that also serves them. A new
    /// kind is one line here.
    public static let standard = OutputRegistry([
        OutputKind(StdoutOutput.self, logger: LogCategory.broker.logger),
        OutputKind(EventLogOutput.self, logger: LogCategory.eventlog.logger),
        OutputKind(WebhookService.self, logger: LogCategory.webhook.logger),
        OutputKind(NATSOutput.self, logger: LogCategory.nats.logger),
        OutputKind(LiveQueryOutput.self, logger: LogCategory.queries.logger),
        OutputKind(ClusterLink.self, logger: LogCategory.cluster.logger),
        OutputKind(RealtimeEndpoint.self, logger: LogCategory.realtime.logger),
        OutputKind(SocketServer.self, logger: LogCategory.socket.logger),
    ])
}

import Herald
import HeraldPostgres

extension WebhookService {
    /// Time between feeding rounds when no event rings: the feeds of
    /// endpoints another daemon was feeding, and rounds that failed.
    static let feedInterval: Duration = .seconds(1)

    /// Each batch the broker delivers means the journal has new rows.
    func ringOnEvents() async {
        while !Task.isCancelled {
            await waitForEndpoints()
            let subscription = broker.subscribe(kind: "webhooks")
            do {
                while !Task.isCancelled, !endpoints.isEmpty {
                    let batch = try await subscription.nextBatch(limit: 65_536)
                    if batch.isEmpty { return }
                    feedDoorbell.ring()
                }
                subscription.cancel()
            } catch {
                // Fell behind: only the doorbell is lost, and the next round reads the journal anyway.
                feedDoorbell.ring()
            }
        }
    }

    /// Durable mode: queues the journal's new events, round after round.
    func feedFromJournal() async {
        var failures = 0
        while !Task.isCancelled {
            await feedDoorbell.wait(timeout: Self.feedInterval)
            guard !Task.isCancelled else { return }
            guard !endpoints.isEmpty else { continue }
            let dispatchers = state.withLock { $0.dispatchers.mapValues(\.dispatcher) }
            let room = dispatchers.compactMapValues { $0.reserveRoom() }
            // Every endpoint busy: its dispatcher asks for the next round when room frees up.
            if room.count == endpoints.count, room.values.allSatisfy({ $0 == 0 }) { continue }
            do {
                let feed = try await store.feedFromJournal(endpoints, room: room)
                failures = 0
                for (name, dispatcher) in dispatchers {
                    dispatcher.handOver(feed.handedOver[name] ?? [], reserved: room[name] ?? 0, heldBack: feed.heldBack.contains(name))
                }
                // Room left while events wait: the round stopped at its page limit, so go on at once.
                if feed.heldBack.contains(where: { (feed.handedOver[$0]?.count ?? 0) < (room[$0] ?? 0) }) { feedDoorbell.ring() }
                wakeDispatchers(feed.queued)
            } catch {
                for (name, dispatcher) in dispatchers { dispatcher.releaseRoom(room[name] ?? 0) }
                failures += 1
                if failures == 1 { logger.warning("cannot feed webhook deliveries from the journal; retrying", metadata: ["error": "\(error)"]) }
                try? await Task.sleep(for: .seconds(1))
            }
        }
    }

    /// Durable mode: events another daemon had in flight when it died are
    /// queued again once its lease has run out. The feeds of endpoints this
    /// daemon serves are marked alive meanwhile, so that journal pruning keeps
    /// their backlog even while they are too busy for a feeding round.
    func requeueAbandoned() async {
        while !Task.isCancelled {
            try? await Task.sleep(for: Self.feedInterval)
            let names = endpoints.map(\.name)
            try? await store.markFeedsAlive(names)
            guard let requeued = try? await store.requeueInFlight(own: false, endpoints: names), !requeued.isEmpty else { continue }
            logger.info("deliveries another daemon had in flight when it stopped are due again", metadata: [
                "deliveries": "\(requeued.values.reduce(0, +))",
            ])
            wakeDispatchers(Set(requeued.keys))
        }
    }

    /// Notify-only mode: queues each event the broker delivers.
    func queueLiveEvents() async {
        while !Task.isCancelled {
            await waitForEndpoints()
            let subscription = broker.subscribe(kind: "webhooks")
            do {
                while !Task.isCancelled, !endpoints.isEmpty {
                    let batch = try await subscription.nextBatch(limit: 4096)
                    if batch.isEmpty { return }
                    let endpoints = self.endpoints
                    let deliveries = batch.flatMap { event in
                        endpoints.filter { $0.filter.matches(event) }.map { (endpoint: $0.name, event: event) }
                    }
                    var attempts = 0
                    while true {
                        do {
                            try await store.queue(deliveries)
                            break
                        } catch {
                            attempts += 1
                            // Notify-only mode keeps nothing while PostgreSQL is away; these are lost like any notification then.
                            if attempts == 5 || Task.isCancelled {
                                logger.error("cannot queue webhook deliveries; dropping them (notify-only mode)", metadata: [
                                    "events": "\(batch.count)", "error": "\(error)",
                                ])
                                break
                            }
                            try? await Task.sleep(for: .seconds(1))
                        }
                    }
                    wakeDispatchers(Set(deliveries.map(\.endpoint)))
                }
                subscription.cancel()
            } catch {
                logger.error("webhooks fell behind the broker and lost events (notify-only mode)", metadata: ["error": "\(error)"])
            }
        }
    }
}

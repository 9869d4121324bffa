/// When the receiver's periodic statements are due: the tick that confirms
/// a parked listener's sweep, the checkpoint, and forgetting prepared
/// statements so that their plans follow the journal's growth.
struct ReceiverSchedule {
    /// Parked with nothing delivered live, a tick only backs the doorbell up.
    let backstopInterval: Duration
    /// At most one checkpoint this often, and, while events flow with no
    /// durable output following, one tick.
    let checkpointInterval: Duration
    /// While a durable output follows, the longest a live delivery waits for
    /// its tick: that output's added latency.
    let observedTickSpacing: Duration
    let replanInterval: Duration
    private(set) var lastTick: ContinuousClock.Instant
    private(set) var lastCheckpoint: ContinuousClock.Instant
    private(set) var lastReplan: ContinuousClock.Instant

    init(
        backstopInterval: Duration, checkpointInterval: Duration, observedTickSpacing: Duration, replanInterval: Duration,
        now: ContinuousClock.Instant
    ) {
        self.backstopInterval = backstopInterval
        self.checkpointInterval = checkpointInterval
        self.observedTickSpacing = observedTickSpacing
        self.replanInterval = replanInterval
        lastTick = now
        lastCheckpoint = now
        lastReplan = now
    }

    /// How long after the last tick the next is due, parked: soon while events
    /// delivered live wait for confirmation, for a checkpoint or for the
    /// durable outputs that read only what a confirmed sweep covers.
    func tickInterval(deliveredLive: Bool, observed: Bool) -> Duration {
        guard deliveredLive else { return backstopInterval }
        return observed ? observedTickSpacing : checkpointInterval
    }

    /// When the next tick is due.
    func nextTick(deliveredLive: Bool, observed: Bool) -> ContinuousClock.Instant {
        lastTick + tickInterval(deliveredLive: deliveredLive, observed: observed)
    }

    func isTickDue(deliveredLive: Bool, observed: Bool, now: ContinuousClock.Instant) -> Bool {
        now >= nextTick(deliveredLive: deliveredLive, observed: observed)
    }

    mutating func tickSent(now: ContinuousClock.Instant) {
        lastTick = now
    }

    func isCheckpointDue(now: ContinuousClock.Instant) -> Bool {
        now >= lastCheckpoint + checkpointInterval
    }

    mutating func checkpointSaved(now: ContinuousClock.Instant) {
        lastCheckpoint = now
    }

    /// After a catch-up the checkpoint is due at once, whenever the last one was.
    mutating func checkpointAtOnce(now: ContinuousClock.Instant) {
        lastCheckpoint = now - checkpointInterval
    }

    func isReplanDue(now: ContinuousClock.Instant) -> Bool {
        now >= lastReplan + replanInterval
    }

    mutating func replanned(now: ContinuousClock.Instant) {
        lastReplan = now
    }
}

public import Herald

/// What the engine hands a subscriber's stream: a result, and what changed
/// from the result before it, which subscribers that kept up all share.
public struct LiveQueryStep: Sendable {
    var result: LiveQueryResult
    var differenceFromPrevious: LiveQueryDifference?
    var transactionID: UInt64?
    /// Sent to show an idle stream is alive. It carries the newest result,
    /// so that it may stand in for a step it displaced from the buffer.
    var isHeartbeat = false
}

/// One subscriber's updates of a live query: the whole result first (or,
/// when it resumed, what changed since the result it had), then what
/// changed each time the result changes.
///
/// A subscriber that reads slowly is never dropped: it skips to the newest
/// result, and its next update holds everything that changed since the one before.
/// The sequence ends with an error when the query fails, and without one
/// when ``cancel()`` is called or the engine stops.
public struct LiveQuerySubscription: AsyncSequence, Sendable {
    public typealias Element = LiveQueryUpdate

    let stream: AsyncThrowingStream<LiveQueryStep, any Error>
    let continuation: AsyncThrowingStream<LiveQueryStep, any Error>.Continuation
    let resumedFrom: LiveQueryResult?

    /// Ends the sequence and leaves the query.
    public func cancel() {
        continuation.finish()
    }

    public func makeAsyncIterator() -> AsyncIterator {
        AsyncIterator(base: stream.makeAsyncIterator(), previous: resumedFrom)
    }

    public struct AsyncIterator: AsyncIteratorProtocol {
        var base: AsyncThrowingStream<LiveQueryStep, any Error>.AsyncIterator
        var previous: LiveQueryResult?
        var isFirst = true

        /// What ``nextDelivery()`` waited for.
        public enum Delivery: Sendable {
            case update(LiveQueryUpdate)
            /// Nothing changed for a while; a stream writer keeps its peer (and proxies) from timing out.
            case heartbeat
        }

        /// - Throws: ``LiveQueryError`` when the query failed.
        public mutating func next() async throws -> LiveQueryUpdate? {
            while let delivery = try await nextDelivery() {
                if case .update(let update) = delivery { return update }
            }
            return nil
        }

        /// The next update, or a heartbeat when the result has not changed for a while.
        public mutating func nextDelivery() async throws -> Delivery? {
            while let step = try await base.next() {
                defer { isFirst = false }
                let update: LiveQueryUpdate
                if let previous, previous.generation == step.result.generation {
                    if previous.version == step.result.version {
                        if step.isHeartbeat, !isFirst { return .heartbeat }
                        // A resumed subscriber that missed nothing still hears that the query is on.
                        guard isFirst else { continue }
                        update = LiveQueryUpdate(result: step.result, difference: LiveQueryDifference(), transactionID: step.transactionID)
                    } else if previous.version + 1 == step.result.version, let shared = step.differenceFromPrevious {
                        update = LiveQueryUpdate(result: step.result, difference: shared, transactionID: step.transactionID)
                    } else {
                        update = LiveQueryUpdate(result: step.result, difference: step.result.difference(from: previous), transactionID: step.transactionID)
                    }
                } else {
                    update = LiveQueryUpdate(result: step.result, difference: nil, transactionID: step.transactionID)
                }
                previous = step.result
                return .update(update)
            }
            return nil
        }
    }
}

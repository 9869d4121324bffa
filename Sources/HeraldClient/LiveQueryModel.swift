public import Herald
public import Observation

/// A view model whose rows are a live query's: the seed apps' view model,
/// with no refresh code at all.
///
/// ```swift
/// let model = LiveQueryModel(client: client, query: "enrolments_by_course", as: CourseEnrolment.self)
/// Task { await model.run() }
/// // SwiftUI: List(model.rows, id: \.courseId) { ... }
/// ```
///
/// `rows` changes once per change to the result, on the main actor, so
/// SwiftUI (or `withObservationTracking`) redraws exactly then.
@MainActor
@Observable
public final class LiveQueryModel<Row: Decodable & Sendable> {
    /// The rows as the daemon last reported them, decoded.
    public private(set) var rows: [Row] = []
    /// Results received since ``run()`` started.
    public private(set) var updateCount: UInt64 = 0
    /// Why the query stopped: unknown, refused or failed. Nil while it is followed.
    public private(set) var failure: (any Error)?

    @ObservationIgnored private let client: HeraldClient
    @ObservationIgnored private let query: String
    @ObservationIgnored private let parameters: [String: String]
    @ObservationIgnored private let decoder: RowDecoder

    public init(
        client: HeraldClient, query: String, parameters: [String: String] = [:], as type: Row.Type = Row.self,
        decoder: RowDecoder = RowDecoder()
    ) {
        self.client = client
        self.query = query
        self.parameters = parameters
        self.decoder = decoder
    }

    /// Follows the query until the task is cancelled or the daemon refuses it.
    public func run() async {
        failure = nil
        do {
            for try await rows in client.liveQuery(query, parameters: parameters, as: Row.self, decoder: decoder) {
                self.rows = rows
                updateCount += 1
            }
        } catch is CancellationError {
        } catch {
            failure = error
        }
    }
}

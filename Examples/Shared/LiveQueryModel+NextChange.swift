public import HeraldClient
import Observation

extension LiveQueryModel {
    /// Waits until the model's rows or failure change, as SwiftUI would redraw.
    @MainActor
    public func nextChange() async {
        await withCheckedContinuation { continuation in
            withObservationTracking {
                _ = updateCount
                _ = failure
            } onChange: {
                continuation.resume()
            }
        }
        // onChange runs before the change lands: let it land.
        await Task.yield()
    }
}

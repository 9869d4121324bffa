public import ArgumentParser
import Foundation
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

    /// Runs the model and hands each new result to `show`, as a screen
    /// redraws, until `count` results (0: no limit) or `show` returns false.
    /// A failure is written to standard error and exits 69.
    @MainActor
    public func showResults(count: Int = 0, _ show: (_ rows: [Row], _ update: UInt64) throws -> Bool) async throws {
        let following = Task { await run() }
        defer { following.cancel() }
        var shown: UInt64 = 0
        while count == 0 || shown < count {
            // A result may have come before this began waiting.
            if updateCount == shown, failure == nil { await nextChange() }
            if let failure {
                FileHandle.standardError.write(Data("Error: \(failure)\n".utf8))
                throw ExitCode(69)
            }
            guard updateCount > shown else { continue }
            shown = updateCount
            guard try show(rows, shown) else { return }
        }
    }
}

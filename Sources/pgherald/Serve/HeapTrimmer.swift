#if canImport(Glibc)
import Glibc
#endif
import Foundation
import Herald
import ServiceLifecycle

/// Hands back to the system the heap a burst left free, once the daemon is
/// quiet again. Reading a large statement's events holds tens of megabytes
/// for a moment, and glibc's malloc keeps what was freed, so a daemon that
/// once took a 50,000-row statement stayed 40 MB larger for good
/// (measured: `malloc_trim` took it from 47 MB to 6 MB of anonymous memory).
/// Replays of large rows, the pages kept for them and streams that ended
/// free memory too, with no change published: a daemon trimmed only after
/// changes held 550 MB from its heap with no client, 270 MB of it in use.
/// Never under load: a trim holds malloc's locks while it walks the heap,
/// and what it returns would be faulted back in at once (trimming every 5 s
/// under c.'s load of 1000 streams gave stalls of up to half a second).
/// A few changes a second are not load: a daemon that waited for changes to
/// stand still kept what a hundred replays had freed for as long as one
/// user wrote ten rows a second. Nor are a few large ones: forty rows of
/// 10 MB with no client connected left the daemon 220 MB larger until a
/// client came, since neither the activity nor a hundred changes had moved.
struct HeapTrimmer: Service {
    /// What the daemon holds, sampled: streams, replay pages read and kept,
    /// cohorts. A trim follows once it has stood still for `quiet`, with at
    /// most `quietChanges` changes meanwhile, after it or the changes moved.
    let activity: @Sendable () -> [UInt64]
    /// The changes counted since start.
    let changes: @Sendable () -> UInt64
    /// How long the activity must not have moved. Default 5 s.
    var quiet: Duration = .seconds(5)
    /// The most changes a quiet spell may count: 100, twenty a second over the default 5 s.
    var quietChanges: UInt64 = 100
    /// Growth of the resident set since the last trim that calls for a trim
    /// once changes stand still, when neither the activity nor a hundred
    /// changes moved. Default 32 MiB. Not while they come: a trim in the
    /// middle of forty large rows found their memory in use, and the growth
    /// after it was measured from there.
    var residentGrowth: Int = 32 << 20

    /// glibc's `malloc_trim`, which Swift's Glibc module does not declare; nil with another libc.
    private static let trim: (@convention(c) (Int) -> Int32)? = dlsym(UnsafeMutableRawPointer(bitPattern: 0), "malloc_trim")
        .map { unsafeBitCast($0, to: (@convention(c) (Int) -> Int32).self) }

    /// The daemon's resident bytes, from `/proc/self/statm`; 0 where it cannot be read.
    static func residentBytes() -> Int {
        guard let statm = try? String(contentsOfFile: "/proc/self/statm", encoding: .utf8),
            let pages = statm.split(separator: " ").dropFirst().first.flatMap({ Int($0) })
        else { return 0 }
        return pages * sysconf(Int32(_SC_PAGESIZE))
    }

    func run() async throws {
        guard let trim = Self.trim else { return }
        var seen = (activity: activity(), changes: changes())
        var trimmed = seen
        var residentAfterTrim = Self.residentBytes()
        while true {
            do {
                try await cancelWhenGracefulShutdown { try await Task.sleep(for: quiet) }
            } catch {
                return
            }
            let now = (activity: activity(), changes: changes())
            let isQuiet = now.activity == seen.activity && now.changes - seen.changes <= quietChanges
            let movedSinceTrim = now.activity != trimmed.activity || now.changes - trimmed.changes > quietChanges
                || (now.changes != trimmed.changes && now.changes == seen.changes && Self.residentBytes() > residentAfterTrim + residentGrowth)
            if isQuiet, movedSinceTrim {
                _ = trim(0)
                trimmed = now
                residentAfterTrim = Self.residentBytes()
            }
            seen = now
        }
    }
}

import Foundation
@testable import HeraldEventLog
import Testing

@Suite struct EventLogTests {
    let directory: String = {
        let path = FileManager.default.temporaryDirectory.appending(path: "pgherald-log-\(UUID().uuidString.prefix(8))").path
        try? FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
        return path
    }()

    func line(_ number: Int) -> [UInt8] {
        Array(#"{"id":"\#(number)","padding":"\#(String(repeating: "x", count: number % 50))"}"#.utf8) + [UInt8(ascii: "\n")]
    }

    func contents(_ path: String) -> [String] {
        ((try? String(contentsOfFile: path, encoding: .utf8)) ?? "").split(separator: "\n").map(String.init)
    }

    @Test func rotationKeepsEveryLineOnceInOrderAndNoneTorn() throws {
        let path = "\(directory)/events.jsonl"
        let file = try EventLogFile(configuration: EventLogConfiguration(path: path, maximumSize: 4096, keep: 100))
        for start in stride(from: 0, to: 1000, by: 7) {
            try file.append((start..<min(start + 7, 1000)).map(line))
        }
        let generations = EventLogReader.rotatedGenerations(of: path) + [path]
        #expect(generations.count > 10)
        let lines = generations.flatMap(contents)
        #expect(lines == (0..<1000).map { String(decoding: line($0).dropLast(), as: UTF8.self) })
        for generation in generations {
            let size = (try FileManager.default.attributesOfItem(atPath: generation)[.size] as? Int) ?? 0
            #expect(size <= 4096, "\(generation) is \(size) bytes")
        }
    }

    /// A daemon killed mid-write left a line without its newline, and the next
    /// line appended after a restart was glued to it: readers lost both.
    @Test func aTornLastLineIsCutWhenTheFileIsOpenedAgain() throws {
        let path = "\(directory)/events.jsonl"
        let whole = line(1) + line(2)
        FileManager.default.createFile(atPath: path, contents: Data(whole + line(3).prefix(10)))
        let file = try EventLogFile(configuration: EventLogConfiguration(path: path, maximumSize: 1 << 20, keep: 2))
        try file.append([line(3), line(4)])
        #expect(contents(path) == [1, 2, 3, 4].map { String(decoding: line($0).dropLast(), as: UTF8.self) })

        let torn = "\(directory)/only-torn.jsonl"
        FileManager.default.createFile(atPath: torn, contents: Data(String(repeating: "y", count: 5000).utf8))
        let alone = try EventLogFile(configuration: EventLogConfiguration(path: torn, maximumSize: 1 << 20, keep: 2))
        try alone.append([line(5)])
        #expect(contents(torn) == [String(decoding: line(5).dropLast(), as: UTF8.self)])
    }

    @Test func onlyKeepGenerationsStay() throws {
        let path = "\(directory)/events.jsonl"
        let file = try EventLogFile(configuration: EventLogConfiguration(path: path, maximumSize: 4096, keep: 2))
        for number in 0..<500 { try file.append([line(number)]) }
        #expect(EventLogReader.rotatedGenerations(of: path) == ["\(path).2", "\(path).1"])
        #expect(!FileManager.default.fileExists(atPath: "\(path).3"))
    }

    @Test func theReaderFollowsAcrossRotationsAndNeverSeesATornLine() throws {
        let path = "\(directory)/events.jsonl"
        let file = try EventLogFile(configuration: EventLogConfiguration(path: path, maximumSize: 2048, keep: 50))
        let reader = EventLogReader(path: path)
        var seen: [String] = []
        for number in 0..<300 {
            try file.append([line(number)])
            if number % 13 == 0 { seen += try reader.readAvailable() }
        }
        // A partly written line is held back until its newline arrives.
        let handle = try #require(FileHandle(forWritingAtPath: path))
        try handle.seekToEnd()
        try handle.write(contentsOf: Data(#"{"id":"partial"#.utf8))
        seen += try reader.readAvailable()
        #expect(seen == (0..<300).map { String(decoding: line($0).dropLast(), as: UTF8.self) })
        try handle.write(contentsOf: Data("}\n".utf8))
        #expect(try reader.readAvailable() == [#"{"id":"partial}"#])
    }

    /// A durable log writes a whole batch at once, which can rotate the file
    /// several times between two looks of a follower.
    @Test func theReaderCatchesUpOnGenerationsRotatedOutBetweenTwoReads() throws {
        let path = "\(directory)/events.jsonl"
        let file = try EventLogFile(configuration: EventLogConfiguration(path: path, maximumSize: 2048, keep: 50))
        let reader = EventLogReader(path: path)
        try file.append([line(0)])
        var seen = try reader.readAvailable()
        try file.append((1..<200).map(line))
        #expect(EventLogReader.rotatedGenerations(of: path).count >= 3)
        seen += try reader.readAvailable()
        seen += try reader.readAvailable()
        #expect(seen == (0..<200).map { String(decoding: line($0).dropLast(), as: UTF8.self) })
    }

    @Test func reopenFollowsAFileMovedAwayByLogrotate() throws {
        let path = "\(directory)/events.jsonl"
        let file = try EventLogFile(configuration: EventLogConfiguration(path: path))
        try file.append([line(1)])
        try FileManager.default.moveItem(atPath: path, toPath: "\(path).moved")
        // Until the SIGHUP, writes still reach the moved file: nothing is lost in between.
        try file.append([line(2)])
        try file.reopen()
        try file.append([line(3)])
        #expect(contents("\(path).moved").count == 2)
        #expect(contents(path).count == 1)
    }
}

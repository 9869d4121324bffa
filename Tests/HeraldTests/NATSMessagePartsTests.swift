import HeraldNATS
import Testing

@Suite struct NATSMessagePartsTests {
    let headers = [(name: "Pgherald-Count", value: "7"), (name: "Pgherald-Txid", value: "42")]

    @Test func aPayloadThatFitsGoesWholeWithoutAPartHeader() {
        let parts = NATSMessageParts.split(Array(repeating: 1, count: 900), messageID: "e1", headers: headers, maximumPayload: 1024)
        #expect(parts.count == 1 && parts[0].messageID == "e1" && parts[0].payload.count == 900)
        #expect(!parts[0].headers.contains { $0.name == NATSMessageParts.header })
    }

    @Test func eachPartFitsWithItsHeadersAndTheyJoinInOrder() {
        let payload = (0..<10_000).map { UInt8($0 % 251) }
        let parts = NATSMessageParts.split(payload, messageID: "e2", headers: headers, maximumPayload: 1024)
        #expect(parts.count > 10)
        for (index, part) in parts.enumerated() {
            let all = part.headers + [("Nats-Msg-Id", part.messageID)]
            let encoded = all.reduce("NATS/1.0\r\n\r\n".utf8.count) { $0 + $1.name.utf8.count + $1.value.utf8.count + 4 }
            #expect(encoded + part.payload.count <= 1024, "part \(index + 1) takes \(encoded + part.payload.count) bytes")
            #expect(part.messageID == "e2/\(index + 1)" && part.headers.last?.value == "\(index + 1)/\(parts.count)")
        }
        var assembler = NATSMessageParts.Assembler()
        var outcomes: [NATSMessageParts.Assembler.Outcome] = []
        for part in parts { outcomes.append(assembler.add(part: part.headers.last!.value, payload: Array(part.payload))) }
        #expect(outcomes.dropLast().allSatisfy { $0 == .waiting })
        #expect(outcomes.last == .whole(payload))
        #expect(!assembler.isJoining)
    }

    @Test func aPartOutOfItsPlaceIsSkippedAndTheNextPayloadStillJoins() {
        var assembler = NATSMessageParts.Assembler()
        // Reading began between the parts of one payload.
        #expect(assembler.add(part: "2/3", payload: [2]) == .skipped("part 2/3 came where 1/N was expected"))
        #expect(assembler.add(part: "3/3", payload: [3]) == .skipped("part 3/3 came where 1/N was expected"))
        #expect(assembler.add(part: "1/2", payload: [1]) == .waiting)
        // A new first part drops the unfinished payload, and is joined itself.
        #expect(assembler.add(part: "1/2", payload: [5]) == .skipped("part 1/2 came before part 2/2 of the payload before it"))
        #expect(assembler.isJoining)
        #expect(assembler.add(part: "2/2", payload: [6]) == .whole([5, 6]))
        for malformed in ["", "1", "0/2", "3/2", "1/1", "a/b", "1/2/3"] {
            #expect(assembler.add(part: malformed, payload: [9]) == .skipped("Pgherald-Part '\(malformed)' is not I/N"))
        }
    }
}

import Foundation
import Testing

/// The modules depend downward only: a module imports pgherald modules of
/// lower layers, never a sibling or one above it. ARCHITECTURE.md draws
/// the same layers.
@Suite struct ModuleLayeringTests {
    static let layers: [String: Int] = [
        "CLibPQ": 0, "HeraldSupport": 0, "Herald": 0,
        "HeraldPostgres": 1, "HeraldSettings": 1, "HeraldRealtime": 1, "HeraldNATS": 1,
        "HeraldOutput": 2,
        "HeraldWebhooks": 3, "HeraldClient": 3, "HeraldHTTP": 3, "HeraldEventLog": 3, "HeraldNATSOutput": 3,
        "HeraldConsole": 4, "HeraldCluster": 4, "HeraldService": 4,
        "HeraldSupabase": 5,
        "HeraldAPI": 6,
        "HeraldConfiguration": 7,
        "pgherald": 8, "HeraldBench": 8,
    ]

    static let sources = URL(fileURLWithPath: #filePath)
        .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        .appending(path: "Sources")

    @Test func everyModuleHasALayer() throws {
        let modules = try FileManager.default.contentsOfDirectory(atPath: Self.sources.path)
        #expect(Set(modules) == Set(Self.layers.keys))
    }

    @Test func everyImportPointsDownward() throws {
        var upward: [String] = []
        for (module, layer) in Self.layers {
            let folder = Self.sources.appending(path: module)
            guard let files = FileManager.default.enumerator(atPath: folder.path) else { continue }
            for case let file as String in files where file.hasSuffix(".swift") {
                let text = try String(contentsOf: folder.appending(path: file), encoding: .utf8)
                for line in text.split(separator: "\n") {
                    guard let imported = Self.importedModule(line), let importedLayer = Self.layers[imported] else { continue }
                    if importedLayer >= layer { upward.append("\(module)/\(file) imports \(imported)") }
                }
            }
        }
        #expect(upward == [])
    }

    @Test func theRuleSeesAnUpwardImport() {
        #expect(Self.importedModule("public import HeraldAPI") == "HeraldAPI")
        #expect(Self.importedModule("@preconcurrency import HeraldClient") == "HeraldClient")
        #expect(Self.importedModule("// import HeraldAPI") == nil)
    }

    static func importedModule(_ line: Substring) -> String? {
        let words = line.split(separator: " ").filter { !$0.hasPrefix("@") && $0 != "public" && $0 != "package" && $0 != "internal" }
        guard words.count == 2, words[0] == "import" else { return nil }
        return String(words[1])
    }
}

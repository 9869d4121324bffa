import ArgumentParser
import ExampleSupport
import Foundation
import HeraldClient

/// One species in the list.
struct Species: Decodable, Sendable {
    var id: Int
    var name: String
}

/// The detail of one species: its name and its seedlings, in one row.
struct SpeciesDetail: Decodable, Sendable {
    struct Seedling: Decodable, Sendable {
        var id: Int
        var plantedOn: String
        var heightCm: Double?
    }

    var id: Int
    var name: String
    var seedlings: [Seedling]
}

/// A list of plant species, and a detail view of one of them that follows it.
///
/// The detail is a live query with the species as its parameter: renaming
/// the species or planting a seedling redraws it, and deleting the species
/// closes it with a reason, as a navigation stack pops a detail whose
/// record is gone.
@main
struct PlantSpecies: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "A plant species' detail view, kept current by pgherald's live queries species and species_detail.",
        discussion: "Needs `pgherald serve --config Examples/PlantSpecies/pgherald.yaml` on a database loaded from Examples/PlantSpecies/plants.sql."
    )

    @OptionGroup var daemon: DaemonOptions

    @Option(help: "The species whose detail is open.")
    var species: Int

    @Option(help: "Stop after this many detail results (0: until the detail closes or an interrupt).")
    var count = 0

    @MainActor
    func run() async throws {
        try await daemon.withClient { client in
            try await LiveQueryModel(client: client, query: "species", as: Species.self).showResults(count: 1) { rows, _ in
                Self.show("Species: " + rows.map(\.name).joined(separator: ", "))
                return true
            }
            let detail = LiveQueryModel(
                client: client, query: "species_detail", parameters: ["species_id": String(species)], as: SpeciesDetail.self
            )
            var wasOpen = false
            try await detail.showResults(count: count) { rows, update in
                guard let open = rows.first else {
                    guard wasOpen else {
                        Self.show("No species \(species)")
                        throw ExitCode(66)
                    }
                    Self.show("Closed: species \(species) was deleted")
                    return false
                }
                wasOpen = true
                Self.show(Self.draw(open, update: update))
                return true
            }
        }
    }

    static func draw(_ detail: SpeciesDetail, update: UInt64) -> String {
        var lines = ["\(detail.name) (species \(detail.id), result \(update))"]
        for seedling in detail.seedlings {
            lines.append("  seedling \(seedling.id)  planted \(seedling.plantedOn)  \(seedling.heightCm.map { "\($0) cm" } ?? "not measured")")
        }
        return lines.joined(separator: "\n")
    }

    /// Unbuffered, so a pipe sees each result as it comes.
    static func show(_ text: String) {
        FileHandle.standardOutput.write(Data((text + "\n\n").utf8))
    }
}

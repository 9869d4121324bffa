import Foundation
import Herald

/// What a channel tracks on a topic: its key, a reference unique to this
/// track across the cluster, and the client's own fields.
struct PresenceEntry: Sendable, Hashable {
    let key: String
    let reference: String
    let meta: JSONValue

    init(key: String, reference: String = Self.newReference(), meta: JSONValue) {
        self.key = key
        self.reference = reference
        self.meta = meta
    }

    /// The meta as Phoenix Presence sends it: the client's fields and `phx_ref`.
    var phoenixMeta: JSONValue {
        var fields = meta.objectValue ?? JSONObject()
        fields["phx_ref"] = .string(reference)
        return .object(fields)
    }

    /// As cluster members exchange it.
    var json: JSONValue {
        .object(["key": .string(key), "ref": .string(reference), "meta": meta])
    }

    init?(json: JSONValue) {
        guard let key = json["key"]?.stringValue, let reference = json["ref"]?.stringValue, let meta = json["meta"] else { return nil }
        self.init(key: key, reference: reference, meta: meta)
    }

    /// A reference unique to one track, as Phoenix's `phx_ref`.
    static func newReference() -> String {
        Data((0..<12).map { _ in UInt8.random(in: 0...255) }).base64EncodedString()
    }
}

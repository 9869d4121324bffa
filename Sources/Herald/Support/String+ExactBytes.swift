extension String {
    /// Whether the two are the same bytes, as PostgreSQL's `=` compares names,
    /// claims and (deterministic) text. `==` also holds for canonically
    /// equivalent text, such as `zoë` with one character and with `e` and a
    /// combining diaeresis, which are two users, tables or topics to PostgreSQL.
    package func hasSameBytes(as other: String) -> Bool {
        utf8.elementsEqual(other.utf8)
    }
}

extension Hasher {
    /// Feeds `text` in byte for byte, as ``Swift/String/hasSameBytes(as:)``
    /// compares it (hashing a `String` joins canonically equivalent ones),
    /// then a byte no UTF-8 text holds, so that two fields in a row stay apart.
    package mutating func combine(exactly text: String) {
        for byte in text.utf8 { combine(byte) }
        combine(0xFF as UInt8)
    }
}

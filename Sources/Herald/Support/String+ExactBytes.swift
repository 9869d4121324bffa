import Glibc

extension String {
    /// Whether the two are the same bytes, as PostgreSQL's `=` compares names,
    /// claims and (deterministic) text. `==` also holds for canonically
    /// equivalent text, such as `zoë` with one character and with `e` and a
    /// combining diaeresis, which are two users, tables or topics to PostgreSQL.
    package func hasSameBytes(as other: String) -> Bool {
        guard utf8.count == other.utf8.count else { return false }
        var (left, right) = (self, other)
        // memcmp: a topic may be hundreds of kilobytes, which a byte at a time takes milliseconds to compare.
        return left.withUTF8 { left in
            right.withUTF8 { right in left.isEmpty || memcmp(left.baseAddress!, right.baseAddress!, left.count) == 0 }
        }
    }
}

extension Hasher {
    /// Feeds `text` in byte for byte, as ``Swift/String/hasSameBytes(as:)``
    /// compares it (hashing a `String` joins canonically equivalent ones),
    /// then a byte no UTF-8 text holds, so that two fields in a row stay apart.
    package mutating func combine(exactly text: String) {
        // In one call: a topic may be hundreds of kilobytes, and a byte at a time cost milliseconds.
        var text = text
        text.withUTF8 { combine(bytes: UnsafeRawBufferPointer($0)) }
        combine(0xFF as UInt8)
    }
}

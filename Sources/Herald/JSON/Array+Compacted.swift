extension Array where Element == UInt8 {
    /// These bytes in storage of about their own size, for bytes kept long
    /// after they were built: an event's rows and JSON stay in the history.
    /// Arrays grown by appending can hold up to twice what they use.
    var compacted: [UInt8] {
        guard capacity > count + count / 8 + 16 else { return self }
        return [UInt8](unsafeUninitializedCapacity: count) { buffer, initialized in
            initialized = buffer.initialize(from: self).1
        }
    }
}

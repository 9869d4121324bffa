/// A cluster as one member sees it, for `/stats`, `pgherald status` and the console.
public struct ClusterStatistics: Codable, Sendable, Hashable {
    /// One daemon of the cluster, this one included.
    public struct Member: Codable, Sendable, Hashable {
        public var name: String
        /// `database`: reads the journal itself.
        public var role: String
        /// This daemon.
        public var isSelf: Bool
        /// Seconds since its last message; 0 for this daemon.
        public var heardSecondsAgo: Double
        /// The last event id its broker published.
        public var lastEventID: String?
        /// Events it is behind the member furthest ahead, when both have ids.
        public var lag: UInt64?
        /// Broadcast topic members connected to it.
        public var channels: Int
        /// Presence entries it tracks for its clients.
        public var presences: Int
        /// An edge's last stream sequence read, and how far the stream's head is past it.
        public var streamSequence: UInt64?
        public var streamLag: UInt64?

        public init(
            name: String, role: String, isSelf: Bool, heardSecondsAgo: Double, lastEventID: String?, lag: UInt64? = nil,
            channels: Int, presences: Int, streamSequence: UInt64? = nil, streamLag: UInt64? = nil
        ) {
            self.streamSequence = streamSequence
            self.streamLag = streamLag
            self.name = name
            self.role = role
            self.isSelf = isSelf
            self.heardSecondsAgo = heardSecondsAgo
            self.lastEventID = lastEventID
            self.lag = lag
            self.channels = channels
            self.presences = presences
        }
    }

    public var name: String
    /// The NATS server it is connected to; nil while it is not.
    public var server: String?
    public var members: [Member]
    /// Client broadcasts sent to, and received from, the other members.
    public var broadcastsSent: UInt64
    public var broadcastsReceived: UInt64
    /// Presence changes sent and received, whole states included.
    public var presenceSent: UInt64
    public var presenceReceived: UInt64
    /// Whole presence states asked for, after a gap, an unknown member or a restart.
    public var stateRequests: UInt64

    public init(
        name: String, server: String?, members: [Member], broadcastsSent: UInt64 = 0, broadcastsReceived: UInt64 = 0,
        presenceSent: UInt64 = 0, presenceReceived: UInt64 = 0, stateRequests: UInt64 = 0
    ) {
        self.name = name
        self.server = server
        self.members = members
        self.broadcastsSent = broadcastsSent
        self.broadcastsReceived = broadcastsReceived
        self.presenceSent = presenceSent
        self.presenceReceived = presenceReceived
        self.stateRequests = stateRequests
    }
}

import HeraldPostgres
import Testing

/// `SessionRoute` from what a connection saw, without a database.
@Suite struct SessionRouteTests {
    @Test func theServersOwnPidIsDirect() {
        #expect(SessionRoute.classify(reportedPID: 42, serverPID: 42, otherClientServerPIDs: []) == .direct)
    }

    @Test func anotherClientHandedThisSessionMeansSharedSessions() {
        #expect(SessionRoute.classify(reportedPID: -1_866_369_315, serverPID: 42, otherClientServerPIDs: [43, 42]) == .transactionPooler)
    }

    @Test func aPoolerThatKeepsTheSessionIsASessionPooler() {
        #expect(SessionRoute.classify(reportedPID: 7, serverPID: 42, otherClientServerPIDs: [43, 44, 43]) == .sessionPooler)
    }
}

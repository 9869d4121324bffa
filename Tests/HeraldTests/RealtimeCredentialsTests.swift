import Crypto
import Foundation
import Testing
@testable import Herald
@testable import HeraldRealtime

/// An HS256 JWT of `claims` (JSON text), signed as Supabase signs its anon and user tokens.
func makeToken(_ claims: String, secret: String) -> String {
    let object = (try? JSONParser.parse(claims))?.objectValue ?? [:]
    return RealtimeCredentials.Tokens(secret: Array(secret.utf8), roles: [:]).sign(claims: object)
}

/// A token with another header, for the refusals that depend on it.
func makeToken(_ claims: String, secret: String, header: String) -> String {
    let signed = makeToken(claims, secret: secret).split(separator: ".")
    let encodedHeader = Data(header.utf8).base64EncodedString().replacing("=", with: "")
    return ([encodedHeader] + signed.dropFirst().map(String.init)).joined(separator: ".")
}

@Suite struct RealtimeCredentialsTests {
    let secret = "super-secret-jwt-token-with-at-least-32-characters"
    let todos = AccessGrant(tables: [TablePattern(parsing: "public.todos")!])

    var credentials: RealtimeCredentials {
        RealtimeCredentials(
            keys: [.init(name: "web", secret: "0123456789abcdef-web", grant: todos), .init(name: "admin", secret: "0123456789abcdef-admin", grant: AccessGrant())],
            tokens: .init(secret: Array(secret.utf8), roles: ["anon": todos, "service_role": AccessGrant()])
        )
    }

    @Test func staticKeysGiveTheirGrant() throws {
        let web = try credentials.identify("0123456789abcdef-web", now: 0)
        #expect(web.name == "key web")
        #expect(web.scope == .grants([todos], rules: ["web"]))
        #expect(try credentials.identify("0123456789abcdef-admin", now: 0).scope == .everything)
    }

    @Test func tokensAreVerifiedAndTheirRolePicksTheGrant() throws {
        let now = 1_800_000_000.0
        let anon = try credentials.identify(makeToken(#"{"role":"anon","exp":1900000000,"sub":"u1"}"#, secret: secret), now: now)
        #expect(anon.name == "token (role anon, sub u1)")
        #expect(anon.scope == .grants([todos], rules: ["jwt role anon"]))
        #expect(anon.expiresAt == 1_900_000_000)
        #expect(try credentials.identify(makeToken(#"{"role":"service_role"}"#, secret: secret), now: now).scope == .everything)
    }

    @Test(arguments: [
        ("", RealtimeAuthError.Code.missing),
        ("not-a-key", .unknownKey),
        ("a.b.c", .malformedToken),
        (makeToken(#"{"role":"anon"}"#, secret: "another-secret-of-at-least-32-characters!"), .badSignature),
        (makeToken(#"{"role":"anon","exp":1700000000}"#, secret: "super-secret-jwt-token-with-at-least-32-characters"), .expired),
        (makeToken(#"{"role":"anon","nbf":1900000000}"#, secret: "super-secret-jwt-token-with-at-least-32-characters"), .notYetValid),
        (makeToken(#"{"role":"authenticated"}"#, secret: "super-secret-jwt-token-with-at-least-32-characters"), .roleWithoutGrant),
        (makeToken(#"{"role":"anon"}"#, secret: "super-secret-jwt-token-with-at-least-32-characters", header: #"{"alg":"none"}"#), .malformedToken),
        // RFC 7515: extensions the header marks critical must be understood, and none is.
        (makeToken(#"{"role":"anon"}"#, secret: "super-secret-jwt-token-with-at-least-32-characters", header: #"{"alg":"HS256","crit":["b64"],"b64":false}"#), .malformedToken),
        // RFC 7519: NumericDate. A date in another shape is no date, not a missing one.
        (makeToken(#"{"role":"anon","exp":"1700000000"}"#, secret: "super-secret-jwt-token-with-at-least-32-characters"), .malformedToken),
        (makeToken(#"{"role":"anon","exp":"2030-01-01"}"#, secret: "super-secret-jwt-token-with-at-least-32-characters"), .malformedToken),
        (makeToken(#"{"role":"anon","exp":null}"#, secret: "super-secret-jwt-token-with-at-least-32-characters"), .malformedToken),
        (makeToken(#"{"role":"anon","exp":[1900000000]}"#, secret: "super-secret-jwt-token-with-at-least-32-characters"), .malformedToken),
        (makeToken(#"{"role":"anon","exp":1e400}"#, secret: "super-secret-jwt-token-with-at-least-32-characters"), .malformedToken),
        (makeToken(#"{"role":"anon","nbf":"0"}"#, secret: "super-secret-jwt-token-with-at-least-32-characters"), .malformedToken),
        (makeToken(#"{"role":"anon","iat":true}"#, secret: "super-secret-jwt-token-with-at-least-32-characters"), .malformedToken),
        (makeToken(#"{"role":"anon","exp":1900000000,"exp":"never"}"#, secret: "super-secret-jwt-token-with-at-least-32-characters"), .malformedToken),
    ])
    func refusalsSayWhy(presented: String, code: RealtimeAuthError.Code) {
        #expect {
            try credentials.identify(presented, now: 1_800_000_000)
        } throws: { error in
            (error as? RealtimeAuthError)?.code == code
        }
    }

    /// A refusal names only what the daemon takes: with no realtime.keys, garbage is a malformed token.
    @Test func aRefusalNamesOnlyTheCredentialsConfigured() throws {
        let tokensOnly = RealtimeCredentials(keys: [], tokens: credentials.tokens)
        let keysOnly = RealtimeCredentials(keys: credentials.keys, tokens: nil)
        func refusal(_ credentials: RealtimeCredentials) -> RealtimeAuthError? {
            do { _ = try credentials.identify("garbage", now: 0) } catch { return error }
            return nil
        }
        #expect(refusal(tokensOnly)?.code == .malformedToken)
        #expect(refusal(tokensOnly)?.message.contains("realtime.keys") == false)
        #expect(refusal(tokensOnly)?.message.contains("realtime.jwt") == true)
        #expect(refusal(keysOnly)?.message == "the key is not one of realtime.keys")
        #expect(refusal(credentials)?.message.contains("nor a JWT") == true)
    }

    @Test func aTokenWithItsSignatureStrippedIsRefused() {
        let token = makeToken(#"{"role":"service_role"}"#, secret: secret)
        let unsigned = token.split(separator: ".").prefix(2).joined(separator: ".") + "."
        #expect(throws: RealtimeAuthError.self) { try credentials.identify(unsigned, now: 0) }
    }

    @Test func anExpiryPastTheDaemonsLifetimeSetsNoTimer() {
        #expect(RealtimeIdentity.secondsUntilExpiry(1_060, now: 1_000) == 60)
        #expect(RealtimeIdentity.secondsUntilExpiry(940, now: 1_000) == -60)
        #expect(RealtimeIdentity.secondsUntilExpiry(1_000 + 20 * 366 * 86_400, now: 1_000) == nil)
        #expect(RealtimeIdentity.secondsUntilExpiry(.greatestFiniteMagnitude, now: 1_000) == nil)
    }

    @Test func resumeBookKeepsPositionsForItsWindowOnly() throws {
        var session = RealtimeSession()
        let join = try PhoenixFraming.v1.decode(Array(#"{"topic":"realtime:a","event":"phx_join","payload":{"config":{"postgres_changes":[{"event":"*","schema":"public"}]}},"ref":"1"}"#.utf8))
        guard case .join(let first)? = session.receive(join).first else { return }
        var book = ResumeBook(window: .seconds(60))
        let start = ContinuousClock.now
        let key = ResumeBook.Key(caller: "key web", topic: first.topic, bindings: first.bindings)
        book.remember(key, after: "41", at: start)
        // A rejoin's bindings get new ids; the key ignores them.
        guard case .join(let again)? = session.receive(join).last else { return }
        #expect(ResumeBook.Key(caller: "key web", topic: again.topic, bindings: again.bindings) == key)
        #expect(book.take(ResumeBook.Key(caller: "key other", topic: first.topic, bindings: first.bindings), at: start) == nil)
        #expect(book.take(key, at: start + .seconds(59)) == "41")
        #expect(book.take(key, at: start + .seconds(59)) == nil)
        book.remember(key, after: "42", at: start)
        #expect(book.take(key, at: start + .seconds(61)) == nil)
        var off = ResumeBook(window: .zero)
        off.remember(key, after: "1", at: start)
        #expect(off.count == 0)
    }

    /// What expired is dropped as the book is used, not once it holds its capacity;
    /// a key holds a digest of the bindings, whatever their size.
    @Test func resumeBookDropsWhatExpiredAsItGoes() throws {
        var book = ResumeBook(window: .seconds(60), capacity: 100_000)
        let start = ContinuousClock.now
        let filter = String(repeating: "x", count: 900)
        let binding = try RealtimeBinding(.object(["event": .string("*"), "schema": .string("public"), "table": .string("t"), "filter": .string("v=eq.\(filter)")]), id: 1)
        for channel in 0..<500 {
            book.remember(ResumeBook.Key(caller: "key web", topic: "realtime:\(channel)", bindings: [binding]), after: "1", at: start)
        }
        #expect(book.count == 500)
        let key = ResumeBook.Key(caller: "key web", topic: "realtime:late", bindings: [binding])
        #expect(key.bindings.utf8.count == 64)
        book.remember(key, after: "2", at: start + .seconds(61))
        #expect(book.count == 1)
        // A channel that closes and rejoins again and again keeps one position.
        for round in 0..<1_000 {
            #expect(book.take(key, at: start + .seconds(62)) != nil || round == 0)
            book.remember(key, after: "\(round)", at: start + .seconds(62))
        }
        #expect(book.count == 1)
        #expect(book.take(key, at: start + .seconds(121)) == "999")
    }
}

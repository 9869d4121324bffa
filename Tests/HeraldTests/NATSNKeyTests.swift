import Foundation
import HeraldNATS
import Testing

/// NKeys and credentials files, checked against keys and signatures made by
/// the `nkeys` Python package (PyNaCl), not by pgherald's own encoder.
@Suite struct NATSNKeyTests {
    /// `nkeys.encode_seed(bytes(range(32)), PREFIX_BYTE_USER)` and its public key.
    static let seed = "SUAAAAICAMCAKBQHBAEQUCYMBUHA6EARCIJRIFIWC4MBSGQ3DQOR4H776Y"
    static let publicKey = "UAB2CB576PHBBPQ5ODORRZ2LYCMWPZGWGCN2KDK7DXOIMZASKUY3RLKK"
    /// `sign(b"nonce-123")` with that key, base64url without padding. Ed25519 signatures are deterministic.
    static let signature = "Kb2XR8zISj7OG5ul-xW0TPU9fjFJaoMQsCg462Sudxr_xIW_-1dpIOEb8GuRqiyhEew9LzQAjbRa8Aq15jZDAA"

    @Test func aUserSeedMakesItsPublicKeyAndSignsTheNonce() throws {
        let key = try NATSNKey(seed: Self.seed + "\n")
        #expect(key.publicKey == Self.publicKey)
        #expect(try key.sign(nonce: "nonce-123") == Self.signature)
    }

    @Test(arguments: [
        ("SUAAAAICAMCAKBQHBAEQUCYMBUHA6EARCIJRIFIWC4MBSGQ3DQOR4H777Y", "checksum"),
        ("SAAAAAICAMCAKBQHBAEQUCYMBUHA6EARCIJRIFIWC4MBSGQ3DQOR4HYMHI", "not a user's"),
        (publicKey, "not a seed"),
        ("SUAAAAICAMCAKBQHBAEQUCYMBUHA6EARCIJRIFIWC4MBSGQ3DQOR4H776", "not a seed"),
        ("su-not-base32!", "not a seed"),
    ])
    func aSeedThatIsNotAUserSeedSaysWhy(_ seed: String, _ reason: String) {
        #expect {
            _ = try NATSNKey(seed: seed)
        } throws: { error in
            (error as? NATSError)?.code == .refused && "\(error)".contains(reason)
        }
    }

    /// A `.creds` file as `nsc generate creds` writes it, with its prose and blank lines.
    @Test func aCredentialsFileGivesItsJWTAndSeed() throws {
        let file = """
            -----BEGIN NATS USER JWT-----
            eyJ0eXAiOiJKV1QiLCJhbGciOiJlZDI1NTE5LW5rZXkifQ.eyJzdWIiOiJVIn0.c2ln
            ------END NATS USER JWT------

            ************************* IMPORTANT *************************
            NKEY Seed printed below can be used to sign and prove identity.
            NKEYs are sensitive and should be treated as secrets.

            -----BEGIN USER NKEY SEED-----
            \(Self.seed)
            ------END USER NKEY SEED------

            *************************************************************
            """
        let authentication = try NATSAuthentication(credentialsFile: file)
        #expect(authentication == .credentials(
            jwt: "eyJ0eXAiOiJKV1QiLCJhbGciOiJlZDI1NTE5LW5rZXkifQ.eyJzdWIiOiJVIn0.c2ln", key: try NATSNKey(seed: Self.seed)
        ))
        let options = try NATSConnectOptions(name: "pgherald", version: "1", authentication: authentication).answering(nonce: "nonce-123")
        var bytes: [UInt8] = []
        NATSClientOperation.connect(options).encode(into: &bytes)
        let line = String(decoding: bytes, as: UTF8.self)
        #expect(line.contains(#""jwt":"eyJ0eXAiOiJKV1QiLCJhbGciOiJlZDI1NTE5LW5rZXkifQ.eyJzdWIiOiJVIn0.c2ln""#))
        #expect(line.contains(#""sig":"\#(Self.signature)""#))
        #expect(!line.contains(Self.seed), "the seed never leaves the machine")
    }

    @Test func anNKeyUserSendsItsPublicKeyAndSignatureAndNeedsANonce() throws {
        let options = NATSConnectOptions(name: "pgherald", version: "1", authentication: .nkey(try NATSNKey(seed: Self.seed)))
        var bytes: [UInt8] = []
        NATSClientOperation.connect(try options.answering(nonce: "nonce-123")).encode(into: &bytes)
        let line = String(decoding: bytes, as: UTF8.self)
        #expect(line.contains(#""nkey":"\#(Self.publicKey)""#) && line.contains(#""sig":"\#(Self.signature)""#))
        #expect(throws: NATSError.self) { try options.answering(nonce: nil) }
    }

    @Test(arguments: [
        ("-----BEGIN USER NKEY SEED-----\n\(seed)\n------END USER NKEY SEED------\n", "no user JWT"),
        ("-----BEGIN NATS USER JWT-----\na.b.c\n------END NATS USER JWT------\n", "no user seed"),
        ("-----BEGIN NATS USER JWT-----\nnot-a-jwt\n------END NATS USER JWT------\n-----BEGIN USER NKEY SEED-----\n\(seed)\n------END USER NKEY SEED------\n", "header.claims.signature"),
    ])
    func aBrokenCredentialsFileSaysWhatIsMissing(_ file: String, _ reason: String) {
        #expect {
            _ = try NATSAuthentication(credentialsFile: file)
        } throws: { error in
            "\(error)".contains(reason)
        }
    }
}

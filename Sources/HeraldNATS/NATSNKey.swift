import Crypto
import Foundation

/// A NATS user's NKey: an Ed25519 key pair written as a seed (`SU…`), with
/// which the client signs the nonce of the server's `INFO`. The server knows
/// only the public key (`U…`), so the secret never travels.
///
/// An encoded key is RFC 4648 base32, without padding, of a prefix that names
/// the key's role, the 32 key bytes and a CRC-16 (XMODEM, little-endian) of
/// what precedes it. A seed's first two bytes carry both the seed prefix and
/// the role of the public key it makes.
public struct NATSNKey: Sendable, Equatable {
    /// The public key, `U…`: what the server's configuration names.
    public let publicKey: String
    private let signingKey: Curve25519.Signing.PrivateKey

    /// Reads a user's seed, `SU…`, as `nsc` and `nk -gen user` write it.
    public init(seed: String) throws(NATSError) {
        let text = seed.trimmingCharacters(in: .whitespacesAndNewlines)
        guard let bytes = Base32.decode(text), bytes.count == 36 else {
            throw NATSError(.refused, "the NKey seed is not a seed (SU… in base32, 58 characters)")
        }
        guard Self.checksum(bytes[0..<34]) == UInt16(bytes[34]) | UInt16(bytes[35]) << 8 else {
            throw NATSError(.refused, "the NKey seed's checksum is wrong: it was cut or mistyped")
        }
        let seedPrefix = bytes[0] & 0b1111_1000
        let role = (bytes[0] & 0b0000_0111) << 5 | (bytes[1] & 0b1111_1000) >> 3
        guard seedPrefix == Self.seedPrefix else { throw NATSError(.refused, "the NKey is not a seed: it must start with S") }
        guard role == Self.userPrefix else {
            throw NATSError(.refused, "the NKey seed is not a user's (SU…): a client signs in with a user key, not an operator's or account's")
        }
        do {
            signingKey = try Curve25519.Signing.PrivateKey(rawRepresentation: bytes[2..<34])
        } catch {
            throw NATSError(.refused, "the NKey seed does not make an Ed25519 key: \(error)")
        }
        publicKey = Self.encode(role: role, key: Array(signingKey.publicKey.rawRepresentation))
    }

    /// The nonce's signature, base64url without padding, for `CONNECT`'s `sig`.
    public func sign(nonce: String) throws -> String {
        let signature = try signingKey.signature(for: Data(nonce.utf8))
        return signature.base64EncodedString()
            .replacingOccurrences(of: "+", with: "-")
            .replacingOccurrences(of: "/", with: "_")
            .replacingOccurrences(of: "=", with: "")
    }

    public static func == (left: NATSNKey, right: NATSNKey) -> Bool {
        left.publicKey == right.publicKey
    }

    static let seedPrefix: UInt8 = 18 << 3
    static let userPrefix: UInt8 = 20 << 3

    static func encode(role: UInt8, key: [UInt8]) -> String {
        var bytes = [role] + key
        let crc = checksum(bytes[...])
        bytes += [UInt8(crc & 0xFF), UInt8(crc >> 8)]
        return Base32.encode(bytes)
    }

    /// CRC-16/XMODEM: polynomial 0x1021, initial value 0.
    static func checksum(_ bytes: ArraySlice<UInt8>) -> UInt16 {
        var crc: UInt16 = 0
        for byte in bytes {
            crc ^= UInt16(byte) << 8
            for _ in 0..<8 {
                crc = crc & 0x8000 != 0 ? crc << 1 ^ 0x1021 : crc << 1
            }
        }
        return crc
    }
}

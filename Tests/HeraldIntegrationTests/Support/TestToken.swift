import Herald
import HeraldRealtime

/// An HS256 JWT of `claims` (JSON text) signed with `secret`.
func makeToken(_ claims: String, secret: String) -> String {
    RealtimeCredentials.Tokens(secret: Array(secret.utf8), roles: [:]).sign(claims: (try? JSONParser.parse(claims))?.objectValue ?? [:])
}

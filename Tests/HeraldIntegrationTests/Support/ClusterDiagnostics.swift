import Foundation
import HeraldPostgres

/// What the test cluster was doing when it did not answer: for a failure
/// that CI shows and a rerun does not.
enum ClusterDiagnostics {
    /// The server's processes, its sessions as seen over TCP (which a full
    /// Unix socket backlog would not stop), and the end of its log.
    static func describe(connInfo: String) -> String {
        var parts: [String] = ["processes:\n" + output(of: "ps -o pid,stat,etime,wchan:32,args -u postgres")]
        let portField: Substring? = connInfo.split(separator: " ").first { $0.hasPrefix("port=") }
        let port: String = portField.map { String($0.dropFirst(5)) } ?? "5432"
        do {
            let connection = try LibpqConnection.connect(
                ConnectionString("host=127.0.0.1 port=\(port) user=postgres dbname=postgres"), timeout: .seconds(5)
            )
            let sessions = try connection.execute("""
                SELECT pid, datname, application_name, backend_type, state, wait_event_type, wait_event,
                       now() - backend_start AS age, left(query, 80) AS query
                  FROM pg_stat_activity ORDER BY backend_start
                """)
            var lines: [String] = []
            for row in sessions.rows {
                let fields: [String] = row.map { $0 ?? "" }
                lines.append(fields.joined(separator: " | "))
            }
            parts.append("sessions over TCP:\n" + lines.joined(separator: "\n"))
        } catch {
            parts.append("sessions over TCP: \(error)")
        }
        if let cluster = ProcessInfo.processInfo.environment["PGHERALD_TEST_CLUSTER"] {
            parts.append("server log:\n" + output(of: "tail -n 40 '\(cluster)/server.log'"))
        }
        return parts.joined(separator: "\n")
    }

    private static func output(of command: String) -> String {
        guard let pipe = popen("\(command) 2>&1", "r") else { return "(\(command) did not start)" }
        var data = Data()
        var buffer = [UInt8](repeating: 0, count: 4096)
        while true {
            let count = fread(&buffer, 1, buffer.count, pipe)
            if count <= 0 { break }
            data.append(contentsOf: buffer[0..<count])
        }
        pclose(pipe)
        return String(decoding: data, as: UTF8.self)
    }
}

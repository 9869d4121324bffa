import Foundation

/// What the test cluster was doing when it did not answer: for a failure
/// that CI shows and a rerun does not.
enum ClusterDiagnostics {
    /// The server's processes, whose titles say what each session is doing
    /// or waiting for, and the end of its log. Neither needs a connection,
    /// which is what failed.
    static func describe() -> String {
        var parts: [String] = ["processes:\n" + output(of: "ps -o pid,stat,etime,wchan:32,args -u postgres")]
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

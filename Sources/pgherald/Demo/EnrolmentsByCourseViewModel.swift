import Dispatch
import Herald
import HeraldPostgres

/// The teaching series' "enrolments by course" view model: each course with
/// how many students are enrolled in it, reloaded on `refresh()`.
@MainActor
final class EnrolmentsByCourseViewModel: RefreshableViewModel {
    struct Row: Equatable {
        var shortCode: String
        var name: String
        var enrolled: Int
    }

    private(set) var rows: [Row] = []
    private(set) var lastError: String?
    private(set) var refreshes = 0
    let connectionString: ConnectionString
    let onChange: @MainActor (EnrolmentsByCourseViewModel) -> Void
    private let queue = DispatchQueue(label: "pgherald.demo.query")

    init(connectionString: ConnectionString, onChange: @escaping @MainActor (EnrolmentsByCourseViewModel) -> Void) {
        self.connectionString = connectionString
        self.onChange = onChange
    }

    func refresh() async {
        let connectionString = self.connectionString
        // libpq blocks; run it off the main actor and the async runtime.
        let result: Result<[Row], LibpqError> = await withCheckedContinuation { continuation in
            queue.async {
                continuation.resume(returning: Result { () throws(LibpqError) in
                    try Self.load(connectionString)
                })
            }
        }
        refreshes += 1
        switch result {
        case .success(let rows):
            self.rows = rows
            lastError = nil
        case .failure(let error):
            lastError = error.message
        }
        onChange(self)
    }

    private nonisolated static func load(_ connectionString: ConnectionString) throws(LibpqError) -> [Row] {
        let connection = try LibpqConnection.connect(connectionString, timeout: .seconds(5), applicationName: "pgherald-demo")
        let result = try connection.execute("""
            SELECT c.short_code, c.name, count(e.student_id) AS enrolled
              FROM course c LEFT JOIN enrols_in e ON e.course_id = c.id
             GROUP BY c.id, c.short_code, c.name
             ORDER BY c.short_code
            """)
        return try result.namedRows.map { row throws(LibpqError) in
            Row(shortCode: try row.value("short_code"), name: try row.value("name"), enrolled: try row.value("enrolled"))
        }
    }
}

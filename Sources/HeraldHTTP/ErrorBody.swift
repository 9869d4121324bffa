package import Herald

/// The JSON body of a refused request.
package struct ErrorBody: Encodable {
    package var error: String
    package var parameter: String?
    package var message: String

    package init(_ filterError: FilterError) {
        error = filterError.code.rawValue
        parameter = filterError.parameter
        message = filterError.message
    }

    package init(code: String, message: String) {
        error = code
        self.message = message
    }
}

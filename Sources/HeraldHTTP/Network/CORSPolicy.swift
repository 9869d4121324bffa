package import HTTPTypes
package import Hummingbird

/// Which browser origins may read the network listener's answers
/// (`http.cors.origins`), and the headers that tell a browser so.
///
/// Only exact origins: a page's `Origin` is echoed back when it is listed,
/// never `*`, and `Vary: Origin` keeps caches from mixing answers. Tokens
/// travel in `Authorization` or `?access_token=`, never in cookies, so
/// credentials are not allowed.
package struct CORSPolicy: Sendable {
    package let origins: Set<String>

    /// What a browser may send besides the simple headers.
    package static let allowedRequestHeaders = "authorization, content-type, last-event-id, accept, apikey, x-api-key, x-client-info"
    /// Preflight answers are cached this long by the browser.
    package static let maximumAge = "600"

    package init(origins: [String]) {
        self.origins = Set(origins)
    }

    /// The headers an answer to a request from `origin` gets: none for a
    /// request without an origin, or from one not listed.
    package func headers(forOrigin origin: String?) -> HTTPFields {
        var fields = HTTPFields()
        guard let origin, origins.contains(origin) else { return fields }
        fields[.accessControlAllowOrigin] = origin
        fields[.vary] = "Origin"
        return fields
    }

    /// The answer to a preflight (`OPTIONS` with `Access-Control-Request-Method`),
    /// or nil when `request` is not one.
    package func preflight(_ request: Request) -> Response? {
        guard request.method == .options, request.headers[.accessControlRequestMethod] != nil else { return nil }
        let origin = request.headers[.origin]
        guard let origin, origins.contains(origin) else {
            return Response.json(.forbidden, ErrorBody(
                code: "origin_not_allowed", message: "the origin \(origin?.prefix(100) ?? "(none)") is not in http.cors.origins"
            ))
        }
        var fields = headers(forOrigin: origin)
        fields[.accessControlAllowMethods] = "GET, POST, OPTIONS"
        fields[.accessControlAllowHeaders] = Self.allowedRequestHeaders
        fields[.accessControlMaxAge] = Self.maximumAge
        return Response(status: .noContent, headers: fields)
    }
}

/// Answers preflights and adds the CORS headers to the router's answers.
/// `/events`, which does not pass the router, gets them where its head is written.
package struct CORSMiddleware<Context: RequestContext>: RouterMiddleware {
    package let policy: CORSPolicy

    package init(policy: CORSPolicy) {
        self.policy = policy
    }

    package func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        if let answer = policy.preflight(request) { return answer }
        var response = try await next(request, context)
        response.headers.append(contentsOf: policy.headers(forOrigin: request.headers[.origin]))
        return response
    }
}

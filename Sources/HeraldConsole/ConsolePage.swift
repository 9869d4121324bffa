import HTTPTypes
package import Hummingbird
import NIOCore

/// The console's page and assets, compiled into the binary: nothing is
/// fetched from anywhere else, and it works offline. Plain HTML, CSS and
/// JavaScript, so that no build tool is needed.
package enum ConsolePage {
    /// The page: the key form, then the counters, the tail, the outputs and health.
    package static let html = #"""
    <!doctype html>
    <html lang="en">
    <head>
    <meta charset="utf-8">
    <meta name="viewport" content="width=device-width, initial-scale=1">
    <title>pgherald console</title>
    <link rel="icon" href="data:,">
    <link rel="stylesheet" href="/console/app.css">
    <script src="/console/app.js" defer></script>
    </head>
    <body>
    <header>
      <h1>pgherald</h1>
      <span id="health-badge" class="badge">connecting</span>
      <span id="viewer" class="muted"></span>
    </header>
    <section id="login" class="card" hidden>
      <h2>Key</h2>
      <form id="key-form">
        <p>The console on TCP asks for the console key, or one of the realtime keys.</p>
        <input id="key-input" type="password" autocomplete="current-password" aria-label="key" placeholder="key">
        <button type="submit">Open</button>
        <p id="key-error" class="error" role="alert"></p>
      </form>
    </section>
    <main id="main" hidden>
      <section class="card" id="changes">
        <h2>Changes</h2>
        <div class="counter"><span id="change-count">0</span> <span class="muted">since start</span></div>
        <canvas id="chart" width="640" height="120" aria-label="changes per second over the last five minutes"></canvas>
        <div class="muted" id="rate"></div>
        <table id="tables"><thead><tr><th>table</th><th class="number">changes</th></tr></thead><tbody></tbody></table>
      </section>
      <section class="card" id="tail-card">
        <h2>Live events</h2>
        <form id="filter">
          <input id="filter-table" name="table" placeholder="table, such as public.course" aria-label="table">
          <select id="filter-op" name="op" aria-label="operation">
            <option value="">any op</option><option>INSERT</option><option>UPDATE</option><option>DELETE</option><option>TRUNCATE</option>
          </select>
          <input id="filter-where" name="where" placeholder="where, such as name.eq.Drama" aria-label="where">
          <button type="submit">Apply</button>
          <button type="button" id="pause">Pause</button>
        </form>
        <p id="tail-status" class="muted"></p>
        <ol id="tail"></ol>
        <div id="detail" hidden>
          <h3 id="detail-title"></h3>
          <table id="detail-rows"><thead><tr><th>column</th><th>old</th><th>new</th></tr></thead><tbody></tbody></table>
        </div>
      </section>
      <section class="card" id="outputs-card">
        <h2>Subscribers and outputs</h2>
        <table id="subscribers"><thead><tr><th>subscriber kind</th><th class="number">open</th></tr></thead><tbody></tbody></table>
        <table id="outputs"><thead><tr><th>output</th><th>health</th><th>feed</th><th class="number">delivered</th></tr></thead><tbody></tbody></table>
        <div id="webhooks"></div>
        <div id="dead-letters"></div>
        <div id="queries"></div>
        <div id="cluster"></div>
      </section>
      <section class="card" id="health-card">
        <h2>Health</h2>
        <dl id="health"></dl>
      </section>
    </main>
    </body>
    </html>
    """#

    /// An asset with headers that keep the page to its own origin.
    package static func response(_ text: String, contentType: String) -> Response {
        var headers = HTTPFields()
        headers[.contentType] = contentType
        headers[.cacheControl] = "no-cache"
        headers[HTTPField.Name("Content-Security-Policy")!] = "default-src 'self'; img-src 'self' data:; frame-ancestors 'none'; base-uri 'none'; form-action 'self'"
        headers[HTTPField.Name("X-Content-Type-Options")!] = "nosniff"
        headers[HTTPField.Name("Referrer-Policy")!] = "no-referrer"
        return Response(status: .ok, headers: headers, body: .init(byteBuffer: ByteBuffer(string: text)))
    }
}

extension ConsolePage {
    /// The page's behaviour.
    package static let script = #"""
    'use strict';
    // The console reads what any client reads: GET /console/state once a second
    // (counters, outputs, health) and one /events stream for the tail.
    const $ = (id) => document.getElementById(id);
    const keyName = 'pgherald-console-key';
    const tailLimit = 200;
    const chartSeconds = 300;

    const query = new URLSearchParams(location.search);
    if (query.has('key')) {
      // Given once in the URL, kept for the session, and taken out of the address bar.
      sessionStorage.setItem(keyName, query.get('key'));
      query.delete('key');
      history.replaceState(null, '', location.pathname + (query.toString() ? '?' + query : ''));
    }
    let key = sessionStorage.getItem(keyName) || '';
    let polling = false;
    let changeCount = 0;
    let samples = [];
    let source = null;
    let paused = false;
    let lastEventID = null;
    let selected = null;
    let uptime = null;
    let lastLag = null;

    function authorization() {
      return key ? { Authorization: 'Bearer ' + key } : {};
    }

    function text(value) {
      return value === undefined || value === null ? '' : String(value);
    }

    function cell(row, value, className) {
      const td = row.insertCell();
      td.textContent = text(value);
      if (className) td.className = className;
      return td;
    }

    function fill(tbody, rows, render) {
      tbody.replaceChildren();
      for (const item of rows) render(tbody.insertRow(), item);
    }

    function showLogin(message) {
      polling = false;
      closeTail();
      $('main').hidden = true;
      $('login').hidden = false;
      $('key-error').textContent = message || '';
      $('health-badge').textContent = 'key needed';
      $('health-badge').className = 'badge bad';
      $('key-input').focus();
    }

    async function poll() {
      if (!polling) return;
      try {
        const response = await fetch('/console/state', { headers: authorization(), cache: 'no-store' });
        if (response.status === 401) {
          const body = await response.json().catch(() => ({}));
          showLogin(key ? (body.message || 'the key was refused') : '');
          return;
        }
        if (!response.ok) throw new Error('the daemon answered ' + response.status);
        const state = await response.json();
        $('login').hidden = true;
        $('main').hidden = false;
        render(state);
        if (!source && !paused) openTail();
      } catch (error) {
        $('health-badge').textContent = 'unreachable, retrying';
        $('health-badge').className = 'badge bad';
      }
      setTimeout(poll, 1000);
    }

    function start() {
      if (polling) return;
      polling = true;
      poll();
    }

    function render(state) {
      const stats = state.statistics;
      $('viewer').textContent = state.viewer + (state.mayControl ? ' (controls allowed)' : '');
      const listening = stats.listener.state === 'listening';
      $('health-badge').textContent = stats.listener.state;
      $('health-badge').className = 'badge ' + (listening ? 'ok' : 'bad');
      const now = Date.now();
      if (uptime !== null && stats.uptimeSeconds < uptime) {
        // The daemon restarted: its counters start again from zero.
        changeCount = 0;
        samples = [];
      }
      uptime = stats.uptimeSeconds;
      if (samples.length) {
        const last = samples[samples.length - 1];
        const seconds = (now - last.at) / 1000;
        if (seconds > 0) samples.push({ at: now, count: stats.changeCount, rate: Math.max(0, stats.changeCount - last.count) / seconds });
      } else {
        samples.push({ at: now, count: stats.changeCount, rate: 0 });
      }
      samples = samples.filter((sample) => now - sample.at <= chartSeconds * 1000);
      setCount(stats.changeCount);
      drawChart();
      // Over the chart's window, not the last poll: a burst a few seconds ago still shows.
      const span = (now - samples[0].at) / 1000;
      const changes = Math.max(0, stats.changeCount - samples[0].count);
      $('rate').textContent = span < 1 ? 'measuring…'
        : changes.toLocaleString() + (changes === 1 ? ' change' : ' changes') + ' in the last ' + Math.round(span) + ' s ('
          + (changes / span).toFixed(1) + '/s)';
      fill($('tables').tBodies[0], Object.entries(stats.tables || {}).sort((a, b) => b[1] - a[1]), (row, [table, count]) => {
        cell(row, table);
        cell(row, count.toLocaleString(), 'number');
      });
      fill($('subscribers').tBodies[0], Object.entries(stats.subscribers || {}).sort(), (row, [kind, count]) => {
        cell(row, kind);
        cell(row, count, 'number');
      });
      fill($('outputs').tBodies[0], Object.entries(stats.outputs || {}).sort(), (row, [name, output]) => {
        cell(row, name);
        cell(row, output.health + (output.reason ? ': ' + output.reason : ''));
        cell(row, output.feed);
        cell(row, (output.delivered || 0).toLocaleString(), 'number');
      });
      renderWebhooks(stats.webhooks || {});
      renderDeadLetters(state.deadLetters, state.mayControl);
      renderQueries(stats.queries || {});
      renderCluster(stats.cluster);
      const health = [
        ['listener', stats.listener.state + (stats.listener.reason ? ': ' + stats.listener.reason : '')],
        ['durability', stats.durability || 'unknown'],
        ['uptime', formatDuration(stats.uptimeSeconds)],
        ['version', stats.version],
        ['subscribers that fell behind their mailbox (dropped, or read on from the history)', stats.overflows],
        ['lag', lastLag === null ? 'no event shown yet' : 'the last event shown arrived ' + lastLag + ' ms after its trigger ran'],
      ];
      if (stats.journal) {
        health.push(['journal', stats.journal.rows.toLocaleString() + ' events, ' + (stats.journal.bytes / 1048576).toFixed(1) + ' MiB']);
        health.push(['oldest journal event', stats.journal.oldestAt || 'none']);
      }
      const dl = $('health');
      dl.replaceChildren();
      for (const [name, value] of health) {
        const dt = document.createElement('dt');
        dt.textContent = name;
        const dd = document.createElement('dd');
        dd.textContent = text(value);
        dl.append(dt, dd);
      }
    }

    // A titled table in the box `id`, a row per item; nothing when there are no items.
    function section(id, title, columns, items, render) {
      const box = $(id);
      box.replaceChildren();
      if (!items || !items.length) return;
      const heading = document.createElement('h3');
      heading.textContent = title;
      const table = document.createElement('table');
      const head = table.createTHead().insertRow();
      for (const column of columns) cell(head, column);
      const body = table.createTBody();
      for (const item of items) render(body.insertRow(), item);
      box.append(heading, table);
    }

    function renderWebhooks(webhooks) {
      section('webhooks', 'Webhook endpoints', ['endpoint', 'backlog', 'next retry', 'dead', 'last error'], Object.keys(webhooks).sort(), (row, name) => {
        const endpoint = webhooks[name];
        cell(row, name);
        cell(row, endpoint.backlog === undefined ? '-' : endpoint.backlog, 'number');
        cell(row, endpoint.nextRetryAt ? nextRetry(endpoint.nextRetryAt) : (endpoint.failing ? 'probing' : 'no'));
        cell(row, endpoint.dead === undefined ? '-' : endpoint.dead, 'number');
        // A 2xx is an answer, not an error.
        const failed = endpoint.lastStatus && (endpoint.lastStatus < 200 || endpoint.lastStatus > 299);
        cell(row, endpoint.lastError || (failed ? 'HTTP ' + endpoint.lastStatus : 'none'));
      });
    }

    function nextRetry(at) {
      const seconds = (Date.parse(at) - Date.now()) / 1000;
      return seconds > 0 ? 'in ' + formatDuration(seconds) : 'due now';
    }

    function renderDeadLetters(letters, mayControl) {
      section('dead-letters', 'Dead letters', ['id', 'endpoint', 'event', 'attempts', 'error', ''], letters, (row, letter) => {
        cell(row, letter.id);
        cell(row, letter.destination);
        cell(row, letter.eventID);
        cell(row, letter.attempts, 'number');
        cell(row, letter.error);
        const button = document.createElement('button');
        button.textContent = 'Replay';
        button.className = 'replay';
        button.dataset.id = letter.id;
        button.disabled = !mayControl;
        button.title = mayControl ? 'send it again now' : 'replaying needs the console key';
        button.addEventListener('click', () => replay(letter.id, button));
        row.insertCell().append(button);
      });
    }

    async function replay(id, button) {
      button.disabled = true;
      const response = await fetch('/console/dead-letters/' + id + '/replay', { method: 'POST', headers: authorization() });
      const body = await response.json().catch(() => ({}));
      button.textContent = response.ok ? 'Queued' : (body.message || 'refused');
    }

    function renderQueries(queries) {
      section('queries', 'Live queries', ['query', 'subscribers', 'evaluations', 'last error'], Object.keys(queries).sort(), (row, name) => {
        cell(row, name);
        cell(row, queries[name].subscribers, 'number');
        cell(row, queries[name].evaluations, 'number');
        cell(row, queries[name].lastError || '');
      });
    }

    // Each member heard within the timeout, this daemon first: its role, lag, and the clients on it.
    function renderCluster(cluster) {
      const title = cluster ? 'Cluster ' + cluster.name + ' (' + (cluster.server || 'reconnecting to NATS') + '; broadcasts '
        + cluster.broadcastsSent + ' sent, ' + cluster.broadcastsReceived + ' received; presence '
        + cluster.presenceSent + ' sent, ' + cluster.presenceReceived + ' received)' : '';
      section('cluster', title, ['member', 'role', 'heard', 'at event', 'lag', 'channels', 'present'], cluster ? cluster.members : [], (row, member) => {
        cell(row, member.name);
        cell(row, member.role);
        cell(row, member.isSelf ? 'this daemon' : member.heardSecondsAgo.toFixed(1) + ' s ago');
        cell(row, member.lastEventID || '-', 'number');
        cell(row, member.streamSequence === undefined ? (member.lag === undefined ? '-' : member.lag) : 'stream ' + (member.streamLag || 0), 'number');
        cell(row, member.channels, 'number');
        cell(row, member.presences, 'number');
      });
    }

    function setCount(count) {
      if (count > changeCount) changeCount = count;
      $('change-count').textContent = changeCount.toLocaleString();
    }

    function drawChart() {
      const canvas = $('chart');
      const context = canvas.getContext('2d');
      const width = canvas.width;
      const height = canvas.height;
      context.clearRect(0, 0, width, height);
      const peak = Math.max(1, ...samples.map((sample) => sample.rate));
      const step = width / chartSeconds;
      context.fillStyle = '#2f6fdf';
      const newest = samples.length ? samples[samples.length - 1].at : Date.now();
      for (const sample of samples) {
        const x = width - ((newest - sample.at) / 1000 + 1) * step;
        const bar = (sample.rate / peak) * (height - 14);
        context.fillRect(x, height - bar, Math.max(1, step - 1), bar);
      }
      context.fillStyle = getComputedStyle(document.body).color;
      context.font = '11px system-ui, sans-serif';
      context.fillText('peak ' + peak.toFixed(1) + '/s', 4, 11);
    }

    function formatDuration(seconds) {
      seconds = Math.round(seconds);
      if (seconds < 60) return seconds + ' s';
      if (seconds < 3600) return Math.floor(seconds / 60) + ' min ' + (seconds % 60) + ' s';
      return Math.floor(seconds / 3600) + ' h ' + Math.floor((seconds % 3600) / 60) + ' min';
    }

    function tailURL() {
      const parameters = new URLSearchParams();
      const table = $('filter-table').value.trim();
      const op = $('filter-op').value;
      const where = $('filter-where').value.trim();
      if (table) parameters.set('table', table);
      if (op) parameters.set('op', op);
      if (where) parameters.set('where', where);
      if (lastEventID) parameters.set('since', lastEventID);
      if (key) parameters.set('key', key);
      return '/events?' + parameters;
    }

    function closeTail() {
      if (source instanceof EventSource) source.close();
      source = null;
    }

    // The filter is checked with one request that is cut off once it is accepted,
    // because an EventSource that is refused cannot say why.
    async function openTail() {
      closeTail();
      const url = tailURL();
      const controller = new AbortController();
      source = 'opening';
      try {
        const probe = await fetch(url, { signal: controller.signal, headers: { Accept: 'text/event-stream' } });
        if (!probe.ok) {
          const body = await probe.json().catch(() => ({}));
          source = null;
          $('tail-status').textContent = 'refused: ' + (body.message || probe.status);
          $('tail-status').className = 'error';
          paused = true;
          $('pause').textContent = 'Resume';
          return;
        }
      } catch (error) {
        source = null;
        return;
      } finally {
        controller.abort();
      }
      const stream = new EventSource(url);
      source = stream;
      // Reopened by hand, from the last event shown: the browser's own retry would repeat since=.
      stream.onerror = () => {
        if (source !== stream) return;
        closeTail();
        $('tail-status').textContent = 'reconnecting';
        setTimeout(() => { if (!paused && polling && !source) openTail(); }, 1000);
      };
      const shown = new URLSearchParams(url.split('?')[1]);
      shown.delete('key');
      shown.delete('since');
      $('tail-status').textContent = 'following ' + (shown.toString() || 'every table');
      $('tail-status').className = 'muted';
      for (const op of ['INSERT', 'UPDATE', 'DELETE', 'TRUNCATE']) {
        stream.addEventListener(op, (message) => arrived(JSON.parse(message.data)));
      }
      for (const kind of ['reset', 'overflow', 'revoked']) {
        stream.addEventListener(kind, (message) => {
          const body = JSON.parse(message.data);
          $('tail-status').textContent = kind + ': ' + body.message;
        });
      }
    }

    function arrived(event) {
      lastEventID = event.id;
      setCount(event.count);
      const item = document.createElement('li');
      item.className = 'op-' + event.op;
      const lag = Date.now() - Date.parse(event.at);
      if (lag >= 0) lastLag = lag;
      item.textContent = '#' + event.count + ' ' + event.op + ' ' + event.schema + '.' + event.table + ' ' + JSON.stringify(event.pk || {}) + (lag >= 0 ? ' +' + lag + ' ms' : '');
      item.dataset.count = event.count;
      item.addEventListener('click', () => showDetail(event, item));
      const tail = $('tail');
      tail.prepend(item);
      while (tail.children.length > tailLimit) tail.lastChild.remove();
    }

    function showDetail(event, item) {
      if (selected) selected.classList.remove('selected');
      selected = item;
      item.classList.add('selected');
      $('detail').hidden = false;
      $('detail-title').textContent = event.op + ' ' + event.schema + '.' + event.table + ', event ' + event.id + ', transaction ' + event.txid + ', ' + event.at;
      const oldRow = event.old || {};
      const newRow = event.new || {};
      const columns = [...new Set([...Object.keys(oldRow), ...Object.keys(newRow)])];
      fill($('detail-rows').tBodies[0], columns, (row, column) => {
        cell(row, column);
        const changed = event.op === 'UPDATE' && JSON.stringify(oldRow[column]) !== JSON.stringify(newRow[column]);
        cell(row, column in oldRow ? JSON.stringify(oldRow[column]) : '', changed ? 'changed' : '');
        cell(row, column in newRow ? JSON.stringify(newRow[column]) : '', changed ? 'changed' : '');
      });
    }

    $('key-form').addEventListener('submit', (submitted) => {
      submitted.preventDefault();
      key = $('key-input').value.trim();
      sessionStorage.setItem(keyName, key);
      $('key-error').textContent = '';
      start();
    });

    $('filter').addEventListener('submit', (submitted) => {
      submitted.preventDefault();
      // A new filter starts from now.
      lastEventID = null;
      $('tail').replaceChildren();
      paused = false;
      $('pause').textContent = 'Pause';
      openTail();
    });

    $('pause').addEventListener('click', () => {
      paused = !paused;
      $('pause').textContent = paused ? 'Resume' : 'Pause';
      if (paused) {
        closeTail();
        $('tail-status').textContent = 'paused; resuming reads on from the last event shown';
      } else {
        openTail();
      }
    });

    start();
    """#
}

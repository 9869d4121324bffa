-- Webhooks (version 3). Deliveries waiting for an endpoint, by the endpoint's
-- `name` in the daemon's configuration. In durable mode they are fed from the
-- journal: each endpoint's `webhook_feed` snapshot says which transactions
-- have been fed, so feeding is exact and shared by every daemon on the
-- database. A delivery is leased by setting `leased_by` and pushing
-- `next_attempt_at` to the lease's end; a lease that runs out (its daemon
-- died) makes the row due again. `seq` is feeding order, which `ordered`
-- endpoints keep.
CREATE TABLE IF NOT EXISTS pgherald.webhook_feed (
    endpoint text PRIMARY KEY,
    snapshot pg_snapshot NOT NULL,
    fed_at timestamptz NOT NULL DEFAULT now()
);

-- A feed that hands events straight to a daemon may stop inside a range
-- (version 4): the events of `target` not in `snapshot` are fed up to
-- (after_txid, after_id), and the rest wait in the journal.
ALTER TABLE pgherald.webhook_feed
    ADD COLUMN IF NOT EXISTS target pg_snapshot,
    ADD COLUMN IF NOT EXISTS after_txid xid8,
    ADD COLUMN IF NOT EXISTS after_id bigint;

-- What the feed holds and where it goes (the endpoint's url, table, op and
-- where, in one line), and the daemon that set it. Every daemon on the
-- database feeds an endpoint by name, so one whose endpoint of that name
-- differs would take events from a feed that others filter differently: it
-- refuses to start on it while the daemon that set it runs.
ALTER TABLE pgherald.webhook_feed
    ADD COLUMN IF NOT EXISTS definition text,
    ADD COLUMN IF NOT EXISTS defined_by text;

CREATE TABLE IF NOT EXISTS pgherald.webhook_delivery (
    seq bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    endpoint text NOT NULL,
    event_id bigint NOT NULL,
    body text NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now(),
    attempts int NOT NULL DEFAULT 0,
    next_attempt_at timestamptz NOT NULL DEFAULT now(),
    leased_by text,
    last_status int,
    last_error text,
    last_attempt_at timestamptz,
    UNIQUE (endpoint, event_id)
);
CREATE INDEX IF NOT EXISTS webhook_delivery_due ON pgherald.webhook_delivery (endpoint, next_attempt_at, seq);
CREATE INDEX IF NOT EXISTS webhook_delivery_order ON pgherald.webhook_delivery (endpoint, seq);

-- Deliveries handed straight from the journal to a daemon (version 4). While
-- an unordered endpoint's receiver answers, an event gets no row of its own
-- in webhook_delivery: only its id waits here, in one row per endpoint and
-- daemon name, until its attempt is settled, and a failed attempt queues it
-- in webhook_delivery. A daemon that dies leaves its ids behind; it takes them
-- back when it starts again, and any other daemon once `lease_until` has
-- passed, reading the events from the journal, whose pruning keeps them.
CREATE TABLE IF NOT EXISTS pgherald.webhook_in_flight (
    endpoint text NOT NULL,
    daemon text NOT NULL,
    event_ids bigint[] NOT NULL DEFAULT '{}',
    lease_until timestamptz NOT NULL,
    PRIMARY KEY (endpoint, daemon)
);

-- Deliveries that failed for good: a permanent answer (4xx other than 408,
-- 409, 425, 429), or out of attempts or age. `pgherald webhooks replay` moves
-- them back.
CREATE TABLE IF NOT EXISTS pgherald.webhook_dead_letter (
    id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    endpoint text NOT NULL,
    event_id bigint NOT NULL,
    body text NOT NULL,
    created_at timestamptz NOT NULL,
    attempts int NOT NULL,
    last_status int,
    response_excerpt text,
    error text NOT NULL,
    failed_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX IF NOT EXISTS webhook_dead_letter_endpoint ON pgherald.webhook_dead_letter (endpoint, id);


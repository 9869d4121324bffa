-- Durable outputs (the event log, by default): each reads the journal through
-- a cursor of its own, kept per daemon name and output as webhook feeds are
-- (see webhook_feed), and moved on only once what it read is written. Journal
-- pruning keeps what a cursor has not passed while the cursor is in use.
-- Added without a new publisher version: the triggers do not change, and
-- the daemon asks for this table when an output needs it.
CREATE TABLE IF NOT EXISTS pgherald.output_cursor (
    daemon text NOT NULL,
    output text NOT NULL,
    snapshot pg_snapshot NOT NULL,
    target pg_snapshot,
    after_txid xid8,
    after_id bigint,
    last_event_id bigint,
    moved_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (daemon, output)
);


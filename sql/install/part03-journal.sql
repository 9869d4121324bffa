-- Durable mode: every event, written in the same transaction as the change it
-- describes. The daemon reads it after any gap in LISTEN, and for rows too
-- large for a notification. Catch-up selects by transaction id against
-- snapshots (see the daemon's Journal), so commit order never hides a row.
--
-- Two tables that take turns (version 11), as PgQ's queues do: writers
-- insert into the current one, which the sequence pgherald.journal_current
-- names (read without a snapshot, as the doorbell is), and the daemon
-- empties the other with TRUNCATE once every event in it is older than the
-- retention and delivered, then makes it current. No row is ever updated or
-- deleted, so vacuum has nothing to do here: autovacuum is off for these
-- tables, and a whole table's space comes back at once. Readers read both
-- through the view pgherald.journal.
--
-- A statement's events go into the journal in batches (version 6): one row
-- holds up to 100 events (about 1 MB), from `id` through `last_id`, separated
-- by U+001E, which JSON text never contains, and counts them in
-- `event_count`. A single event's row has neither. Fewer, larger rows are
-- what let a 100,000-row statement pay little more than its own writes; lz4,
-- where the server has it, keeps compressing them cheap.
--
-- Indexes: (txid, id), which every sweep reads, and a BRIN index on id for
-- the rare reads by event id (a client resuming, a webhook delivery handed
-- over), where the btree on id that version 10 kept cost each write 64 bytes
-- of WAL. A write into a page range the BRIN index has not summarized costs
-- it nothing; the daemon summarizes each range once its pages are full, and
-- reads by id scan the few pages after the last summarized range.
--
-- A durable plpgsql trigger writes a single row's change as a compact row:
-- `event` is null, and op, schema_name, table_name, key_columns, new_row,
-- old_row and happened hold its parts, which the view puts together
-- (pgherald.compact_event). Every reader reads `event` through the view.
--
-- An install before version 11 had one table, pgherald.journal: it is kept,
-- with its events, as pgherald.journal_0, read through the view and emptied
-- the same way, and never written again. The install after that drops it.
-- The `pk` member of one row's event, read from the row's JSON. json's ->
-- de-escapes the keys it passes, and fails on \u0000 (a json column may hold
-- it) instead of failing the user's write, so the key is read around it: such
-- a key value shows U+FFFD.
CREATE OR REPLACE FUNCTION pgherald.row_key(source json, key_columns text[]) RETURNS text
LANGUAGE plpgsql IMMUTABLE AS $fn$
DECLARE
    readable json := source;
    key text := '';
    i int;
BEGIN
    IF coalesce(cardinality(key_columns), 0) = 0 THEN
        RETURN 'null';
    END IF;
    IF strpos(source::text, '\u0000') > 0 THEN
        readable := replace(source::text, '\u0000', '\ufffd')::json;
    END IF;
    -- A loop of plain expressions: a query here would cost more than the rest of the event.
    FOR i IN array_lower(key_columns, 1) .. array_upper(key_columns, 1) LOOP
        key := key || CASE WHEN key = '' THEN '{' ELSE ',' END
                   || to_json(key_columns[i])::text || ':' || coalesce((readable -> key_columns[i])::text, 'null');
    END LOOP;
    RETURN key || '}';
END
$fn$;

-- The `pk` member: the usual one-column key read in place, any other through
-- row_key. A SQL function of one expression, so that it is inlined into the
-- queries and expressions that call it, without a call per row.
CREATE OR REPLACE FUNCTION pgherald.event_key(source json, key_columns text[]) RETURNS text
LANGUAGE sql STABLE AS $fn$
    SELECT CASE WHEN cardinality(key_columns) = 1 AND strpos(source::text, '\u0000') = 0
                THEN concat('{', to_json(key_columns[array_lower(key_columns, 1)])::text, ':',
                            coalesce((source -> key_columns[array_lower(key_columns, 1)])::text, 'null'), '}')
                ELSE pgherald.row_key(source, key_columns) END
$fn$;

-- An event kept in parts (version 11, compact rows): the text the triggers
-- would have written, put together when the journal is read. A durable
-- plpgsql trigger writes a single row's change this way, so that the event's
-- envelope, its key and its time's text are built by the daemon's query,
-- outside the writer's transaction: in plpgsql they cost the writer more
-- than the row itself (docs/performance.md, l.).
CREATE OR REPLACE FUNCTION pgherald.compact_event(
    event_id bigint, transaction_id xid8, op text, table_schema text, table_name text,
    key_columns text[], new_row json, old_row json, happened timestamptz
) RETURNS text
LANGUAGE sql STABLE AS $fn$
    SELECT concat('{"id":"', event_id, '","op":"', op, '","schema":', to_json(table_schema)::text,
                  ',"table":', to_json(table_name)::text, ',"pk":', pgherald.event_key(coalesce(new_row, old_row), key_columns),
                  ',"new":', coalesce(new_row::text, 'null'), ',"old":', coalesce(old_row::text, 'null'),
                  ',"txid":"', transaction_id, '","at":"',
                  to_char(happened AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"'), '"}')
$fn$;

DO $journal$
DECLARE
    part int;
    emptied boolean;
BEGIN
    IF (SELECT relkind FROM pg_class WHERE oid = to_regclass('pgherald.journal')) = 'r' THEN
        ALTER TABLE pgherald.journal RENAME TO journal_0;
    END IF;
    IF to_regclass('pgherald.journal_0') IS NOT NULL THEN
        -- Before version 6 it had no batches.
        ALTER TABLE pgherald.journal_0 ADD COLUMN IF NOT EXISTS last_id bigint, ADD COLUMN IF NOT EXISTS event_count int;
        EXECUTE 'SELECT NOT EXISTS (SELECT FROM pgherald.journal_0)' INTO emptied;
        IF emptied THEN
            DROP VIEW IF EXISTS pgherald.journal;
            DROP TABLE pgherald.journal_0;
        END IF;
    END IF;
    FOR part IN 1 .. 2 LOOP
        EXECUTE format($table$
            CREATE TABLE IF NOT EXISTS pgherald.%1$I (
                id bigint NOT NULL,
                txid xid8 NOT NULL,
                event text NOT NULL,
                created_at timestamptz NOT NULL DEFAULT now(),
                last_id bigint,
                event_count int
            ) WITH (autovacuum_enabled = false, toast.autovacuum_enabled = false);
            ALTER TABLE pgherald.%1$I ALTER COLUMN event DROP NOT NULL,
                ADD COLUMN IF NOT EXISTS op text, ADD COLUMN IF NOT EXISTS schema_name text,
                ADD COLUMN IF NOT EXISTS table_name text, ADD COLUMN IF NOT EXISTS key_columns text[],
                ADD COLUMN IF NOT EXISTS new_row json, ADD COLUMN IF NOT EXISTS old_row json,
                ADD COLUMN IF NOT EXISTS happened timestamptz;
            CREATE INDEX IF NOT EXISTS %2$I ON pgherald.%1$I (txid, id);
            CREATE INDEX IF NOT EXISTS %3$I ON pgherald.%1$I USING brin (id) WITH (pages_per_range = 8);
            $table$, 'journal_' || part, 'journal_' || part || '_txid_id', 'journal_' || part || '_id');
        BEGIN
            EXECUTE format('ALTER TABLE pgherald.%I ALTER COLUMN event SET COMPRESSION lz4, ALTER COLUMN new_row SET COMPRESSION lz4, '
                           'ALTER COLUMN old_row SET COMPRESSION lz4', 'journal_' || part);
        EXCEPTION WHEN feature_not_supported OR syntax_error OR invalid_parameter_value THEN
            NULL;
        END;
    END LOOP;
    EXECUTE 'CREATE OR REPLACE VIEW pgherald.journal AS '
        || (SELECT string_agg(format('SELECT id, txid, %s AS event, created_at, last_id, event_count FROM pgherald.%I',
                                     CASE WHEN t = 'journal_0' THEN 'event'
                                          ELSE 'coalesce(event, pgherald.compact_event(id, txid, op, schema_name, table_name, key_columns, new_row, old_row, happened))' END,
                                     t), ' UNION ALL ' ORDER BY t)
              FROM unnest(ARRAY['journal_1', 'journal_2', 'journal_0']) AS t WHERE to_regclass('pgherald.' || t) IS NOT NULL);
END
$journal$;
COMMENT ON VIEW pgherald.journal IS 'pgherald''s journal: every part (pgherald.journal_1, journal_2, and journal_0 kept from an install before version 11)';

-- Which part writers insert into, 1 or 2; only the daemon moves it.
CREATE SEQUENCE IF NOT EXISTS pgherald.journal_current AS int MINVALUE 1 MAXVALUE 2 START 1;

-- When each part last became current, and when it stopped: a part is
-- emptied once `until` is older than the retention (and all of it delivered).
CREATE TABLE IF NOT EXISTS pgherald.journal_part (
    part int PRIMARY KEY,
    since timestamptz,
    until timestamptz
);
INSERT INTO pgherald.journal_part VALUES (1, now(), NULL), (2, NULL, NULL) ON CONFLICT (part) DO NOTHING;

-- Each daemon's progress, by `--name`: every journal event whose transaction
-- is visible in the latest snapshot has reached that daemon's subscribers.
-- `last_event_id` is the last event delivered before a graceful shutdown.
CREATE TABLE IF NOT EXISTS pgherald.checkpoint (
    daemon text NOT NULL,
    seq bigint GENERATED ALWAYS AS IDENTITY,
    snapshot pg_snapshot NOT NULL,
    last_event_id bigint,
    taken_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (daemon, seq)
);

-- Who runs each daemon name. `serve` holds a session advisory lock on its
-- name while connected and refuses to start when another process holds it;
-- this row lets the refused one say which host and process that is.
CREATE TABLE IF NOT EXISTS pgherald.daemon (
    name text PRIMARY KEY,
    host text NOT NULL,
    pid int NOT NULL,
    backend_pid int NOT NULL,
    since timestamptz NOT NULL DEFAULT now()
);

-- The doorbell (version 8). In durable mode the journal is the source of
-- truth, and a daemon that is reading it needs no notification: the durable
-- triggers notify only while some daemon is parked, waiting for one. Its
-- value is the number of parked daemons whose session is alive. A sequence,
-- because writers read it without a snapshot: a writer sees a park at once,
-- in any isolation level, and the daemon needs that to close the window
-- between a writer reading "awake" and committing (see the daemon's
-- DeliveryCursor). Only pgherald.park() sets it.
CREATE SEQUENCE IF NOT EXISTS pgherald.doorbell AS bigint MINVALUE 0 START 0;
ALTER TABLE pgherald.daemon ADD COLUMN IF NOT EXISTS parked boolean NOT NULL DEFAULT false;

-- Marks the daemon `daemon_name` parked or reading, and returns how many
-- daemons are parked. Not durable: a daemon sets its state again at every
-- connection, so its commit does not wait for a flush.
--
-- A writer takes its transaction id before it reads the doorbell, and the
-- daemon sweeps, after parking, every transaction running in its next
-- snapshot: those may have read "reading" and will not ring. A snapshot
-- lists as running only the ids below its xmax, the newest finished id plus
-- one, so this function finishes an id taken after the doorbell changed
-- (version 10): every writer that read the old value has a lower id, and so
-- shows in any snapshot taken after this commit, running or committed.
CREATE OR REPLACE FUNCTION pgherald.park(daemon_name text, is_parked boolean) RETURNS bigint
LANGUAGE plpgsql AS $fn$
DECLARE
    waiting bigint;
BEGIN
    PERFORM pg_catalog.set_config('synchronous_commit', 'off', true);
    -- Daemons change it one at a time, each counting what the others committed.
    PERFORM pg_catalog.pg_advisory_xact_lock(pg_catalog.hashtext('pgherald.doorbell'));
    -- A daemon that died parked stops counting once its session is gone.
    SELECT pg_catalog.count(*) + CASE WHEN is_parked THEN 1 ELSE 0 END INTO waiting FROM pgherald.daemon AS d
     WHERE d.parked AND d.name <> daemon_name
       AND EXISTS (SELECT FROM pg_catalog.pg_stat_activity AS a WHERE a.pid = d.backend_pid);
    PERFORM pg_catalog.setval('pgherald.doorbell', waiting);
    -- The block is a subtransaction, whose write takes a new id, after setval's.
    BEGIN
        UPDATE pgherald.daemon SET parked = is_parked WHERE name = daemon_name;
        IF NOT FOUND THEN
            RAISE EXCEPTION 'pgherald: no daemon named % is registered in pgherald.daemon', daemon_name
                USING HINT = 'serve registers its --name each time it connects, so this row was deleted while it ran; it registers again when it reconnects.';
        END IF;
    EXCEPTION WHEN OTHERS THEN
        RAISE;
    END;
    RETURN waiting;
END
$fn$;


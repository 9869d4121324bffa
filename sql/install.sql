-- pgherald publisher: triggers that send every row change with pg_notify and,
-- in durable mode, also write it to a journal in the same transaction.
--
-- Version 11, for PostgreSQL 14 to 18. Idempotent: running it again upgrades
-- any earlier version in place and keeps the journal, webhook deliveries,
-- watched schemas, exclusions and settings; a newer version is refused.
-- Apply in one transaction:
--     psql -v ON_ERROR_STOP=1 -1 -f sql/install.sql
-- Watched schemas: the `pgherald.schemas` setting (a JSON array of names)
-- when set, else `public` on a first install. Durability: the
-- `pgherald.durability` setting (`durable` or `notify-only`) when set, else
-- what was installed before, else `durable`. Triggers: the `pgherald.triggers`
-- setting (`auto`, `native` or `plpgsql`; see native/) when set, else what was
-- asked before, else `auto`. `pgherald install --schema S --durability D
-- --triggers T` sets them for you.
--
-- Writers need no grant: the trigger functions run as their owner with a
-- fixed search_path, and the schema, the journal and the functions stay
-- closed to other roles. The triggers notify on a channel the first install
-- chose at random (the `channel` setting), which only roles that may read
-- pgherald.setting learn: NOTIFY has no access control of its own, so a
-- well-known channel would let any role read every change, or forge one.

DO $check$
BEGIN
    IF current_setting('server_version_num')::int < 140000 THEN
        RAISE EXCEPTION 'pgherald needs PostgreSQL 14 or later, and this server is %', current_setting('server_version')
            USING HINT = 'pgherald supports PostgreSQL 14, 15, 16, 17 and 18.';
    END IF;
END
$check$;

-- Serialises concurrent installs; released at the end of the transaction.
DO $lock$ BEGIN PERFORM pg_advisory_xact_lock(hashtext('pgherald.install')); END $lock$;

-- An older script over a newer publisher would take back what the newer one
-- changed: refused before anything is. The number is this script's version().
DO $downgrade$
DECLARE
    installed int;
BEGIN
    IF to_regprocedure('pgherald.version()') IS NOT NULL THEN
        EXECUTE 'SELECT pgherald.version()' INTO installed;
        IF installed > 12 THEN
            RAISE EXCEPTION 'pgherald publisher version % is installed, newer than this install script (version 12)', installed
                USING HINT = 'Install with the pgherald release that installed it, or a later one. Nothing was changed.';
        END IF;
    END IF;
END
$downgrade$;

CREATE SCHEMA IF NOT EXISTS pgherald;
COMMENT ON SCHEMA pgherald IS 'pgherald change publisher (see sql/install.sql)';

CREATE OR REPLACE FUNCTION pgherald.version() RETURNS int
LANGUAGE sql IMMUTABLE AS $$ SELECT 12 $$;

CREATE TABLE IF NOT EXISTS pgherald.watched_schema (
    schema_name name PRIMARY KEY
);

-- Kept by name, so an excluded table stays excluded if it is dropped and created again.
CREATE TABLE IF NOT EXISTS pgherald.excluded_table (
    schema_name name NOT NULL,
    table_name name NOT NULL,
    PRIMARY KEY (schema_name, table_name)
);

-- Event ids: unique across transactions, so identical changes in one
-- transaction are never collapsed into one notification.
CREATE SEQUENCE IF NOT EXISTS pgherald.event_id AS bigint;

CREATE TABLE IF NOT EXISTS pgherald.setting (
    name text PRIMARY KEY,
    value text NOT NULL
);

-- The channel the triggers notify on (version 7): chosen once, at random,
-- and kept by every later install. Only roles that may read this table (the
-- daemon's) learn it.
INSERT INTO pgherald.setting VALUES ('channel', 'pgherald_' || replace(gen_random_uuid()::text, '-', ''))
ON CONFLICT (name) DO NOTHING;

DO $durability$
DECLARE
    requested text := nullif(current_setting('pgherald.durability', true), '');
BEGIN
    IF requested IS NOT NULL AND requested NOT IN ('durable', 'notify-only') THEN
        RAISE EXCEPTION 'unknown durability "%"', requested
            USING HINT = 'Use durable (journal and NOTIFY) or notify-only (NOTIFY alone).';
    END IF;
    INSERT INTO pgherald.setting VALUES ('durability', coalesce(requested, 'durable'))
    ON CONFLICT (name) DO UPDATE SET value = coalesce(requested, pgherald.setting.value);
END
$durability$;

-- Which functions the statement triggers call (see native/): `auto` (the
-- native library where the server has it, else plpgsql), `native` (refuse to
-- install without it) or `plpgsql`. The `pgherald.triggers` setting when
-- set, else what was asked before, else `auto`.
DO $triggers$
DECLARE
    requested text := nullif(current_setting('pgherald.triggers', true), '');
BEGIN
    IF requested IS NOT NULL AND requested NOT IN ('auto', 'native', 'plpgsql') THEN
        RAISE EXCEPTION 'unknown triggers "%"', requested
            USING HINT = 'Use auto (native where the server has pgherald''s library, else plpgsql), native or plpgsql.';
    END IF;
    INSERT INTO pgherald.setting VALUES ('triggers', coalesce(requested, 'auto'))
    ON CONFLICT (name) DO UPDATE SET value = coalesce(requested, pgherald.setting.value);
END
$triggers$;

-- The triggers read the channel with a query of their own, whose plan
-- plpgsql keeps: a SQL function would set up an executor per statement.
DROP FUNCTION IF EXISTS pgherald.channel();

-- `durable` or `notify-only`: whether the triggers also write the journal.
CREATE OR REPLACE FUNCTION pgherald.durability() RETURNS text
LANGUAGE sql STABLE AS $$ SELECT value FROM pgherald.setting WHERE name = 'durability' $$;

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

-- The event JSON for one row change, without row data when `omit_rows`.
-- The primary-key columns are the trigger's arguments, captured when the
-- trigger is attached (and refreshed on ALTER TABLE), so no catalog lookup
-- happens per row; a one-column key, the common case, needs no query.
-- (TG_ARGV counts from 0, hence array_lower.)
CREATE OR REPLACE FUNCTION pgherald.row_event(
    event_id bigint, txid xid8, op text, table_schema name, table_name name,
    key_columns text[], new_row json, old_row json, omit_rows boolean
) RETURNS text
LANGUAGE plpgsql VOLATILE AS $fn$
DECLARE
    key json;
    source json := coalesce(new_row, old_row);
BEGIN
    -- json's -> de-escapes the keys it passes, and fails on \u0000 (a json
    -- column may hold it) instead of failing the user's write; the key is
    -- read around it (version 5). Such a key value shows U+FFFD in `pk`.
    IF cardinality(key_columns) > 0 AND strpos(source::text, '\u0000') > 0 THEN
        source := replace(source::text, '\u0000', '\ufffd')::json;
    END IF;
    IF cardinality(key_columns) = 1 THEN
        key := json_build_object(
            key_columns[array_lower(key_columns, 1)],
            source -> key_columns[array_lower(key_columns, 1)]);
    ELSIF cardinality(key_columns) > 1 THEN
        SELECT json_object_agg(column_name, source -> column_name)
          INTO key
          FROM unnest(key_columns) AS column_name;
    END IF;
    RETURN json_build_object(
        'id', event_id::text, 'op', op, 'schema', table_schema, 'table', table_name,
        'pk', key,
        'new', CASE WHEN NOT omit_rows THEN new_row END,
        'old', CASE WHEN NOT omit_rows THEN old_row END,
        'txid', txid::text,
        'at', to_char(clock_timestamp() AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"'))::text;
END
$fn$;

-- NOTIFY rejects payloads of BLCKSZ - NAMEDATALEN - 128 bytes or more. Immutable:
-- block_size is fixed when the cluster is created.
CREATE OR REPLACE FUNCTION pgherald.notify_limit() RETURNS int
LANGUAGE sql IMMUTABLE AS $$ SELECT current_setting('block_size')::int - 192 $$;

-- Whether a table has virtual generated columns (PostgreSQL 18). They read
-- as null in NEW, OLD and transition tables, so the triggers compute them
-- from their expressions. Before 18 the answer is a constant, which costs
-- the triggers nothing; pg_upgrade to 18 needs `pgherald install` again.
DO $virtual$
BEGIN
    IF current_setting('server_version_num')::int >= 180000 THEN
        CREATE OR REPLACE FUNCTION pgherald.has_virtual_columns(target oid) RETURNS boolean
        LANGUAGE sql STABLE AS $fn$
            SELECT EXISTS (SELECT FROM pg_attribute
                            WHERE attrelid = target AND attnum > 0 AND attgenerated = 'v' AND NOT attisdropped)
        $fn$;
    ELSE
        CREATE OR REPLACE FUNCTION pgherald.has_virtual_columns(target oid) RETURNS boolean
        LANGUAGE sql IMMUTABLE AS $fn$ SELECT false $fn$;
    END IF;
END
$virtual$;

-- A table's columns in order, each with the expression that reads it from
-- a row named r: r.column, or a virtual generated column's expression.
CREATE OR REPLACE FUNCTION pgherald.column_sources(target oid)
RETURNS TABLE (column_name name, source text, is_integer boolean)
LANGUAGE sql STABLE AS $fn$
    SELECT a.attname,
           CASE WHEN a.attgenerated = 'v' THEN '(' || pg_get_expr(d.adbin, d.adrelid) || ')' ELSE 'r.' || quote_ident(a.attname) END,
           a.atttypid IN ('int2'::regtype, 'int4'::regtype, 'int8'::regtype)
      FROM pg_attribute a
      LEFT JOIN pg_attrdef d ON d.adrelid = a.attrelid AND d.adnum = a.attnum
     WHERE a.attrelid = target AND a.attnum > 0 AND NOT a.attisdropped
     ORDER BY a.attnum
$fn$;

-- row_to_json of a row of a table with virtual generated columns, with
-- their values computed. A query per row: only such tables pay it.
CREATE OR REPLACE FUNCTION pgherald.computed_row_json(target oid, source anyelement) RETURNS json
LANGUAGE plpgsql STABLE AS $fn$
DECLARE
    result json;
BEGIN
    EXECUTE format('SELECT row_to_json(x) FROM (SELECT %s FROM (SELECT ($1).*) AS r) AS x',
                   (SELECT string_agg(format('%s AS %I', c.source, c.column_name), ', ') FROM pgherald.column_sources(target) AS c))
        INTO result USING source;
    RETURN result;
END
$fn$;

-- Whether a row trigger's arguments name the partitioned table its rows
-- publish under (version 12): '' first, which no column's name can be.
CREATE OR REPLACE FUNCTION pgherald.publishes_under_root(argument_count int, arguments text[]) RETURNS boolean
LANGUAGE sql IMMUTABLE AS $$ SELECT argument_count >= 3 AND arguments[0] = '' $$;

-- A partition's event names the partition beside the partitioned table it
-- publishes under, for the subscribers that need to know which one.
CREATE OR REPLACE FUNCTION pgherald.with_partition(payload text, partition_schema name, partition_name name) RETURNS text
LANGUAGE sql IMMUTABLE AS $$
    SELECT left(payload, -1) || ', "partition_schema" : ' || to_json(partition_schema::text)::text
        || ', "partition" : ' || to_json(partition_name::text)::text || '}'
$$;

-- Notify-only publisher: the notification is the only record of the change.
-- A row too large to notify must never fail the user's write, so its event
-- goes out without row data, marked as omitted.
CREATE OR REPLACE FUNCTION pgherald.publish_row() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $fn$
DECLARE
    event_id bigint := nextval('pgherald.event_id');
    txid xid8 := pg_current_xact_id();
    under_root boolean := pgherald.publishes_under_root(TG_NARGS, TG_ARGV);
    table_schema name := CASE WHEN under_root THEN TG_ARGV[1]::name ELSE TG_TABLE_SCHEMA END;
    table_name name := CASE WHEN under_root THEN TG_ARGV[2]::name ELSE TG_TABLE_NAME END;
    key_columns text[] := CASE WHEN under_root THEN TG_ARGV[3:] ELSE TG_ARGV END;
    -- NEW is null for DELETE, OLD for INSERT.
    new_row json := CASE WHEN TG_OP = 'DELETE' THEN NULL WHEN pgherald.has_virtual_columns(TG_RELID)
                         THEN pgherald.computed_row_json(TG_RELID, NEW) ELSE row_to_json(NEW) END;
    old_row json := CASE WHEN TG_OP = 'INSERT' THEN NULL WHEN pgherald.has_virtual_columns(TG_RELID)
                         THEN pgherald.computed_row_json(TG_RELID, OLD) ELSE row_to_json(OLD) END;
    payload text := pgherald.row_event(event_id, txid, TG_OP, table_schema, table_name, key_columns, new_row, old_row, false);
BEGIN
    IF under_root THEN
        payload := pgherald.with_partition(payload, TG_TABLE_SCHEMA, TG_TABLE_NAME);
    END IF;
    IF octet_length(payload) >= pgherald.notify_limit() THEN
        payload := pgherald.row_event(event_id, txid, TG_OP, table_schema, table_name, key_columns, new_row, old_row, true);
        IF octet_length(payload) >= pgherald.notify_limit() THEN
            payload := pgherald.row_event(event_id, txid, TG_OP, table_schema, table_name, '{}', NULL, NULL, true);
        END IF;
        IF under_root THEN
            payload := pgherald.with_partition(payload, TG_TABLE_SCHEMA, TG_TABLE_NAME);
        END IF;
        payload := left(payload, -1) || ', "omitted" : true}';
    END IF;
    PERFORM pg_notify((SELECT value FROM pgherald.setting WHERE name = 'channel'), payload);
    RETURN NULL;
END
$fn$;

-- Durable publisher: the journal row commits or rolls back with the change.
-- While a daemon is parked (the doorbell), a notification carries the event
-- for low latency, or, when the event is too large for one, a reference the
-- daemon resolves from the journal. Otherwise the daemons are reading the
-- journal and the commit skips NOTIFY's database-wide lock.
CREATE OR REPLACE FUNCTION pgherald.publish_row_durable() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $fn$
DECLARE
    event_id bigint := nextval('pgherald.event_id');
    txid xid8 := pg_current_xact_id();
    under_root boolean := pgherald.publishes_under_root(TG_NARGS, TG_ARGV);
    payload text := pgherald.row_event(
        event_id, txid, TG_OP,
        CASE WHEN under_root THEN TG_ARGV[1]::name ELSE TG_TABLE_SCHEMA END,
        CASE WHEN under_root THEN TG_ARGV[2]::name ELSE TG_TABLE_NAME END,
        CASE WHEN under_root THEN TG_ARGV[3:] ELSE TG_ARGV END,
        CASE WHEN TG_OP = 'DELETE' THEN NULL WHEN pgherald.has_virtual_columns(TG_RELID)
             THEN pgherald.computed_row_json(TG_RELID, NEW) ELSE row_to_json(NEW) END,
        CASE WHEN TG_OP = 'INSERT' THEN NULL WHEN pgherald.has_virtual_columns(TG_RELID)
             THEN pgherald.computed_row_json(TG_RELID, OLD) ELSE row_to_json(OLD) END, false);
BEGIN
    IF under_root THEN
        payload := pgherald.with_partition(payload, TG_TABLE_SCHEMA, TG_TABLE_NAME);
    END IF;
    IF (SELECT last_value FROM pgherald.journal_current) = 1 THEN
        INSERT INTO pgherald.journal_1 (id, txid, event) VALUES (event_id, txid, payload);
    ELSE
        INSERT INTO pgherald.journal_2 (id, txid, event) VALUES (event_id, txid, payload);
    END IF;
    -- Read after the journal row: the transaction has its id before it looks at the doorbell.
    IF (SELECT last_value FROM pgherald.doorbell) = 0 THEN
        RETURN NULL;
    END IF;
    IF octet_length(payload) >= pgherald.notify_limit() THEN
        payload := json_build_object('ref', event_id::text, 'txid', txid::text)::text;
    END IF;
    PERFORM pgherald.ring(payload);
    RETURN NULL;
END
$fn$;

CREATE OR REPLACE FUNCTION pgherald.publish_truncate() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $fn$
DECLARE
    event_id bigint := nextval('pgherald.event_id');
    txid xid8 := pg_current_xact_id();
    payload text := pgherald.row_event(event_id, txid, TG_OP, TG_TABLE_SCHEMA, TG_TABLE_NAME, '{}', NULL, NULL, false);
BEGIN
    IF pgherald.durability() = 'durable' THEN
        IF (SELECT last_value FROM pgherald.journal_current) = 1 THEN
            INSERT INTO pgherald.journal_1 (id, txid, event) VALUES (event_id, txid, payload);
        ELSE
            INSERT INTO pgherald.journal_2 (id, txid, event) VALUES (event_id, txid, payload);
        END IF;
        IF (SELECT last_value FROM pgherald.doorbell) > 0 THEN
            PERFORM pgherald.ring(payload);
        END IF;
        RETURN NULL;
    END IF;
    PERFORM pg_notify((SELECT value FROM pgherald.setting WHERE name = 'channel'), payload);
    RETURN NULL;
END
$fn$;


-- A broadcast from the database, in the spirit of Supabase's realtime.send:
-- it is published with the transaction (on commit, never on rollback),
-- through the journal and NOTIFY as row events are, so it is durable,
-- ordered with the transaction's row changes and reaches every daemon. The
-- event's op is BROADCAST, its table the topic, its new row the event name,
-- payload and privacy; outputs see it only when they ask for topics. Not
-- open to other roles: GRANT USAGE ON SCHEMA pgherald and EXECUTE on this
-- function to those that may send.
CREATE OR REPLACE FUNCTION pgherald.send(payload jsonb, event text, topic text, private boolean DEFAULT true) RETURNS void
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $fn$
DECLARE
    event_id bigint;
    txid xid8 := pg_current_xact_id();
    message text;
BEGIN
    IF coalesce(topic, '') = '' OR coalesce(event, '') = '' THEN
        RAISE EXCEPTION 'pgherald.send needs a topic and an event'
            USING ERRCODE = 'invalid_parameter_value', HINT = 'SELECT pgherald.send(''{"text": "hi"}'', ''message'', ''room-1'', false)';
    END IF;
    event_id := nextval('pgherald.event_id');
    message := json_build_object(
        'id', event_id::text, 'op', 'BROADCAST', 'schema', 'realtime', 'table', topic, 'pk', NULL,
        'new', json_build_object('event', event, 'payload', coalesce(payload, '{}'::jsonb), 'private', coalesce(private, true)),
        'old', NULL, 'txid', txid::text,
        'at', to_char(clock_timestamp() AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"'))::text;
    IF pgherald.durability() = 'durable' THEN
        IF (SELECT last_value FROM pgherald.journal_current) = 1 THEN
            INSERT INTO pgherald.journal_1 (id, txid, event) VALUES (event_id, txid, message);
        ELSE
            INSERT INTO pgherald.journal_2 (id, txid, event) VALUES (event_id, txid, message);
        END IF;
        IF (SELECT last_value FROM pgherald.doorbell) = 0 THEN
            RETURN;
        END IF;
        IF octet_length(message) >= pgherald.notify_limit() THEN
            message := json_build_object('ref', event_id::text, 'txid', txid::text)::text;
        END IF;
        PERFORM pgherald.ring(message);
        RETURN;
    ELSIF octet_length(message) >= pgherald.notify_limit() THEN
        RAISE EXCEPTION 'pgherald.send: a message of % bytes does not fit in a notification (at most % in notify-only mode)',
            octet_length(message), pgherald.notify_limit() - 1
            USING ERRCODE = 'program_limit_exceeded', HINT = 'Send less, or install with durability durable, where any size travels through the journal.';
    END IF;
    PERFORM pg_notify((SELECT value FROM pgherald.setting WHERE name = 'channel'), message);
END
$fn$;
-- The text of an event between its id and its key, and after its rows: the
-- same for every row of a statement. `at` is when the trigger runs.
CREATE OR REPLACE FUNCTION pgherald.event_head(op text, table_schema name, table_name name) RETURNS text
LANGUAGE sql STABLE AS $fn$
    SELECT concat(',"op":"', op, '","schema":', to_json(table_schema)::text, ',"table":', to_json(table_name)::text, ',"pk":')
$fn$;

CREATE OR REPLACE FUNCTION pgherald.event_tail(transaction_id xid8) RETURNS text
LANGUAGE sql VOLATILE AS $fn$
    SELECT concat(',"txid":"', transaction_id, '","at":"',
                  to_char(clock_timestamp() AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"'), '"}')
$fn$;

-- The select-list entries that read each column's JSON text once, from the
-- expressions that read the columns (column_sources), as side || ordinal
-- (n1, n2, ... for the new row); empty for no side. An integer's text is
-- its JSON, without to_json's lookups.
DROP FUNCTION IF EXISTS pgherald.column_json_list(text[], boolean[], text);
CREATE OR REPLACE FUNCTION pgherald.column_json_list(sources text[], integers boolean[], side text) RETURNS text
LANGUAGE sql IMMUTABLE AS $fn$
    SELECT coalesce(string_agg(format(CASE WHEN integers[o] THEN ', coalesce((%s)::text, %L) AS %s%s'
                                           ELSE ', coalesce(to_json(%s)::text, %L) AS %s%s' END,
                                      c, 'null', side, o), '' ORDER BY o), '')
      FROM unnest(sources) WITH ORDINALITY AS u(c, o)
     WHERE side IS NOT NULL
$fn$;

-- The text expression that writes a row's object from its columns' JSON
-- text, as row_to_json would; 'null' for no side.
CREATE OR REPLACE FUNCTION pgherald.row_json_expression(columns text[], side text) RETURNS text
LANGUAGE sql IMMUTABLE AS $fn$
    SELECT CASE WHEN side IS NULL THEN quote_literal('null')
                WHEN cardinality(columns) = 0 THEN quote_literal('{}')
                ELSE (SELECT string_agg(format('%L || %s%s', CASE WHEN o > 1 THEN ',' ELSE '{' END || to_json(c)::text || ':', side, o), ' || ' ORDER BY o)
                        FROM unnest(columns) WITH ORDINALITY AS u(c, o)) || ' || ' || quote_literal('}') END
$fn$;

-- The query that numbers a statement's changed rows and builds their events,
-- in the order the rows changed: columns event_id, key and event. Each
-- column's JSON is read once per row and the row's object is put together
-- as text, which gives what row_to_json gives for about half its cost; the
-- key reuses its columns' JSON, and || joins text without concat's lookup
-- of an output function per argument. An UPDATE's transition tables hold
-- old and new rows in the same order, so they pair up by position.
-- Parameters: $1 the text between the id and the key, $2 the text after the
-- rows. The subquery that takes the ids also keeps each column's JSON from
-- being computed again for the key (a volatile nextval is never flattened),
-- and OFFSET 0 keeps the events from being built again for each place the
-- caller names them.
DROP FUNCTION IF EXISTS pgherald.statement_events_query(text, text[]);
CREATE OR REPLACE FUNCTION pgherald.statement_events_query(op text, key_columns text[], target regclass) RETURNS text
LANGUAGE plpgsql STABLE AS $fn$
DECLARE
    columns text[];
    sources text[];
    integers boolean[];
    new_side text := CASE WHEN op = 'DELETE' THEN NULL ELSE 'n' END;
    old_side text := CASE WHEN op = 'INSERT' THEN NULL ELSE 'o' END;
    key_side text := coalesce(new_side, old_side);
    key_json text := quote_literal('null');
    source text;
BEGIN
    SELECT coalesce(array_agg(c.column_name::text), '{}'), coalesce(array_agg(c.source), '{}'), coalesce(array_agg(c.is_integer), '{}')
      INTO columns, sources, integers
      FROM pgherald.column_sources(target) AS c;
    IF coalesce(cardinality(key_columns), 0) > 0 THEN
        SELECT string_agg(format('%L || %s', CASE WHEN o > 1 THEN ',' ELSE '{' END || to_json(k)::text || ':',
                                 coalesce(key_side || array_position(columns, k), quote_literal('null'))), ' || ' ORDER BY o)
               || ' || ' || quote_literal('}')
          INTO key_json
          FROM unnest(key_columns) WITH ORDINALITY AS u(k, o);
    END IF;
    source := CASE op
        WHEN 'INSERT' THEN format('SELECT nextval(%L) AS event_id%s FROM pgherald_new AS r',
                                  'pgherald.event_id', pgherald.column_json_list(sources, integers, new_side))
        WHEN 'DELETE' THEN format('SELECT nextval(%L) AS event_id%s FROM pgherald_old AS r',
                                  'pgherald.event_id', pgherald.column_json_list(sources, integers, old_side))
        ELSE format(
            'SELECT nextval(%L) AS event_id, paired.* FROM ('
            'SELECT * FROM (SELECT row_number() OVER () AS position%s FROM pgherald_new AS r) AS n '
            'JOIN (SELECT row_number() OVER () AS position%s FROM pgherald_old AS r) AS o USING (position) '
            'ORDER BY position) AS paired',
            'pgherald.event_id', pgherald.column_json_list(sources, integers, new_side),
            pgherald.column_json_list(sources, integers, old_side))
    END;
    RETURN format(
        'SELECT s.event_id, %s AS key, %L || s.event_id::text || %L || $1 || %s || %L || %s || %L || %s || $2 AS event FROM (%s) AS s OFFSET 0',
        key_json, '{"id":"', '"', key_json,
        ',"new":', pgherald.row_json_expression(columns, new_side),
        ',"old":', pgherald.row_json_expression(columns, old_side),
        source);
END
$fn$;

-- The events of a statement of a few rows (up to 64), as statement_events_query
-- builds them for many, from its rows gathered into arrays: a plpgsql function
-- keeps its plan for the session, where a dynamic query (or a SQL function)
-- is planned per statement (about 0.2 ms). The key is read from the row's JSON, which costs more per
-- row than naming the columns, and less than planning, for this many rows.
CREATE OR REPLACE FUNCTION pgherald.few_statement_events(new_rows json[], old_rows json[], head text, tail text, key_columns text[])
RETURNS TABLE (event_id bigint, key text, event text, batch bigint)
LANGUAGE plpgsql VOLATILE AS $fn$
BEGIN
    RETURN QUERY
    SELECT e.event_id, e.key,
           concat('{"id":"', e.event_id, '"', head, e.key, ',"new":', coalesce(e.new_row::text, 'null'),
                  ',"old":', coalesce(e.old_row::text, 'null'), tail),
           sum(octet_length(coalesce(e.new_row, e.old_row)::text)) OVER (ROWS UNBOUNDED PRECEDING) / 1048576
      FROM (SELECT nextval('pgherald.event_id') AS event_id, u.new_row, u.old_row,
                   pgherald.event_key(coalesce(u.new_row, u.old_row), key_columns) AS key
              FROM unnest(new_rows, old_rows) WITH ORDINALITY AS u(new_row, old_row, position)
             ORDER BY u.position) AS e;
END
$fn$;

-- Settings for the query that publishes a statement of many rows, until
-- pgherald.restore_settings puts back what this returns. 64 MB of work
-- memory instead of the default 4: the events are sorted once, and a
-- statement of 100,000 rows then sorts in memory instead of on disk. No JIT:
-- the query's row estimates (an UPDATE's pairing join guesses 50 million
-- rows) cross the JIT thresholds, and compiling took 290 ms of a 100,000-row
-- UPDATE's 690 for a query that runs once.
CREATE OR REPLACE FUNCTION pgherald.settings_for_many_rows() RETURNS text[]
LANGUAGE plpgsql AS $fn$
DECLARE
    previous text[] := ARRAY[current_setting('work_mem'), current_setting('jit')];
BEGIN
    IF pg_size_bytes(previous[1]) < 64 * 1024 * 1024 THEN
        PERFORM set_config('work_mem', '64MB', true);
    END IF;
    PERFORM set_config('jit', 'off', true);
    RETURN previous;
END
$fn$;

CREATE OR REPLACE FUNCTION pgherald.restore_settings(previous text[]) RETURNS void
LANGUAGE plpgsql AS $fn$
BEGIN
    PERFORM set_config('work_mem', previous[1], true);
    PERFORM set_config('jit', previous[2], true);
END
$fn$;

-- Durable publisher, once per statement (version 6). The statement's events
-- go into the journal in the same transaction as the change: a single row's
-- as one compact row, many rows' in batches. One notification carries them
-- when they fit, or else a reference to their range of ids, which the daemon
-- reads from the journal, only while a daemon is parked (the doorbell). A
-- single row, the common case, and a few rows run no dynamic query.
--
-- A single row is the writer's whole cost in plpgsql, so it does the least:
-- one INSERT of the row's JSON and the event's parts, which the view
-- pgherald.journal puts together when the daemon reads them; only while a
-- daemon is parked does the writer put the event together, to ring with it.
-- Each operation and part has a statement of its own: a plpgsql function
-- keeps each one's plan.
CREATE OR REPLACE FUNCTION pgherald.publish_statement_durable() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $fn$
DECLARE
    transaction_id xid8 := pg_current_xact_id();
    part int;
    bell bigint;
    head text;
    tail text;
    changed int;
    new_rows json[];
    old_rows json[];
    first_id bigint;
    through_id bigint;
    batches int;
    payload text;
    previous_settings text[];
BEGIN
    -- Read once the transaction has its id (see pgherald.park).
    SELECT j.last_value, d.last_value INTO part, bell FROM pgherald.journal_current AS j, pgherald.doorbell AS d;
    -- Virtual generated columns read as null from transition tables: only
    -- the query that names every column computes them.
    IF NOT pgherald.has_virtual_columns(TG_RELID) THEN
        IF TG_OP = 'INSERT' THEN
            IF part = 1 THEN
                INSERT INTO pgherald.journal_1 AS j (id, txid, op, schema_name, table_name, key_columns, new_row, happened)
                SELECT nextval('pgherald.event_id'), transaction_id, TG_OP, TG_TABLE_SCHEMA, TG_TABLE_NAME, TG_ARGV, row_to_json(n.*), clock_timestamp()
                  FROM pgherald_new AS n WHERE NOT EXISTS (SELECT FROM pgherald_new OFFSET 1)
                RETURNING j.id, CASE WHEN bell <> 0 THEN pgherald.compact_event(j.id, j.txid, j.op, j.schema_name, j.table_name, j.key_columns,
                                                                                 j.new_row, j.old_row, j.happened) END
                     INTO first_id, payload;
            ELSE
                INSERT INTO pgherald.journal_2 AS j (id, txid, op, schema_name, table_name, key_columns, new_row, happened)
                SELECT nextval('pgherald.event_id'), transaction_id, TG_OP, TG_TABLE_SCHEMA, TG_TABLE_NAME, TG_ARGV, row_to_json(n.*), clock_timestamp()
                  FROM pgherald_new AS n WHERE NOT EXISTS (SELECT FROM pgherald_new OFFSET 1)
                RETURNING j.id, CASE WHEN bell <> 0 THEN pgherald.compact_event(j.id, j.txid, j.op, j.schema_name, j.table_name, j.key_columns,
                                                                                 j.new_row, j.old_row, j.happened) END
                     INTO first_id, payload;
            END IF;
        ELSIF TG_OP = 'UPDATE' THEN
            IF part = 1 THEN
                INSERT INTO pgherald.journal_1 AS j (id, txid, op, schema_name, table_name, key_columns, new_row, old_row, happened)
                SELECT nextval('pgherald.event_id'), transaction_id, TG_OP, TG_TABLE_SCHEMA, TG_TABLE_NAME, TG_ARGV, row_to_json(n.*), row_to_json(o.*), clock_timestamp()
                  FROM pgherald_new AS n, pgherald_old AS o WHERE NOT EXISTS (SELECT FROM pgherald_new OFFSET 1)
                RETURNING j.id, CASE WHEN bell <> 0 THEN pgherald.compact_event(j.id, j.txid, j.op, j.schema_name, j.table_name, j.key_columns,
                                                                                 j.new_row, j.old_row, j.happened) END
                     INTO first_id, payload;
            ELSE
                INSERT INTO pgherald.journal_2 AS j (id, txid, op, schema_name, table_name, key_columns, new_row, old_row, happened)
                SELECT nextval('pgherald.event_id'), transaction_id, TG_OP, TG_TABLE_SCHEMA, TG_TABLE_NAME, TG_ARGV, row_to_json(n.*), row_to_json(o.*), clock_timestamp()
                  FROM pgherald_new AS n, pgherald_old AS o WHERE NOT EXISTS (SELECT FROM pgherald_new OFFSET 1)
                RETURNING j.id, CASE WHEN bell <> 0 THEN pgherald.compact_event(j.id, j.txid, j.op, j.schema_name, j.table_name, j.key_columns,
                                                                                 j.new_row, j.old_row, j.happened) END
                     INTO first_id, payload;
            END IF;
        ELSE
            IF part = 1 THEN
                INSERT INTO pgherald.journal_1 AS j (id, txid, op, schema_name, table_name, key_columns, old_row, happened)
                SELECT nextval('pgherald.event_id'), transaction_id, TG_OP, TG_TABLE_SCHEMA, TG_TABLE_NAME, TG_ARGV, row_to_json(o.*), clock_timestamp()
                  FROM pgherald_old AS o WHERE NOT EXISTS (SELECT FROM pgherald_old OFFSET 1)
                RETURNING j.id, CASE WHEN bell <> 0 THEN pgherald.compact_event(j.id, j.txid, j.op, j.schema_name, j.table_name, j.key_columns,
                                                                                 j.new_row, j.old_row, j.happened) END
                     INTO first_id, payload;
            ELSE
                INSERT INTO pgherald.journal_2 AS j (id, txid, op, schema_name, table_name, key_columns, old_row, happened)
                SELECT nextval('pgherald.event_id'), transaction_id, TG_OP, TG_TABLE_SCHEMA, TG_TABLE_NAME, TG_ARGV, row_to_json(o.*), clock_timestamp()
                  FROM pgherald_old AS o WHERE NOT EXISTS (SELECT FROM pgherald_old OFFSET 1)
                RETURNING j.id, CASE WHEN bell <> 0 THEN pgherald.compact_event(j.id, j.txid, j.op, j.schema_name, j.table_name, j.key_columns,
                                                                                 j.new_row, j.old_row, j.happened) END
                     INTO first_id, payload;
            END IF;
        END IF;
        IF first_id IS NOT NULL THEN
            changed := 1;
        ELSE
            -- No row, or more than one: up to 65, enough to tell a few from many.
            IF TG_OP <> 'DELETE' THEN
                SELECT count(*), array_agg(r) INTO changed, new_rows FROM (SELECT row_to_json(t.*) AS r FROM pgherald_new AS t LIMIT 65) AS s;
            END IF;
            IF TG_OP <> 'INSERT' THEN
                SELECT count(*), array_agg(r) INTO changed, old_rows FROM (SELECT row_to_json(t.*) AS r FROM pgherald_old AS t LIMIT 65) AS s;
            END IF;
            IF changed = 0 THEN
                RETURN NULL;
            END IF;
        END IF;
    ELSE
        changed := 65;
    END IF;
    IF changed = 1 THEN
        -- Its text, built only while a daemon is parked, is in payload.
        through_id := first_id;
        batches := 1;
    ELSIF changed <= 64 THEN
        head := pgherald.event_head(TG_OP, TG_TABLE_SCHEMA, TG_TABLE_NAME);
        tail := pgherald.event_tail(transaction_id);
        -- The same statement for each part: a plan of its own, cached, for each.
        IF part = 1 THEN
            WITH written AS (
                INSERT INTO pgherald.journal_1 AS journal (id, last_id, event_count, txid, event)
                SELECT min(e.event_id), nullif(max(e.event_id), min(e.event_id)), nullif(count(*), 1), transaction_id,
                       string_agg(e.event, chr(30) ORDER BY e.event_id)
                  FROM pgherald.few_statement_events(new_rows, old_rows, head, tail, TG_ARGV) AS e
                 GROUP BY e.batch
                RETURNING journal.id, coalesce(journal.last_id, journal.id) AS through, journal.event
            )
            SELECT count(*), min(w.id), max(w.through), min(CASE WHEN octet_length(w.event) < pgherald.notify_limit() THEN w.event END)
              INTO batches, first_id, through_id, payload
              FROM written AS w;
        ELSE
            WITH written AS (
                INSERT INTO pgherald.journal_2 AS journal (id, last_id, event_count, txid, event)
                SELECT min(e.event_id), nullif(max(e.event_id), min(e.event_id)), nullif(count(*), 1), transaction_id,
                       string_agg(e.event, chr(30) ORDER BY e.event_id)
                  FROM pgherald.few_statement_events(new_rows, old_rows, head, tail, TG_ARGV) AS e
                 GROUP BY e.batch
                RETURNING journal.id, coalesce(journal.last_id, journal.id) AS through, journal.event
            )
            SELECT count(*), min(w.id), max(w.through), min(CASE WHEN octet_length(w.event) < pgherald.notify_limit() THEN w.event END)
              INTO batches, first_id, through_id, payload
              FROM written AS w;
        END IF;
    ELSE
        -- A batch closes at 100 events or about 1 MB: each event weighs its
        -- length plus a hundredth of a megabyte, in one running sum, which
        -- keeps every batch a run of consecutive events. Only a batch that
        -- fits a notification comes back whole. The events reach string_agg
        -- sorted by batch and id, which costs one sort where an ORDER BY
        -- inside the aggregate costs one per batch.
        head := pgherald.event_head(TG_OP, TG_TABLE_SCHEMA, TG_TABLE_NAME);
        tail := pgherald.event_tail(transaction_id);
        previous_settings := pgherald.settings_for_many_rows();
        EXECUTE 'WITH written AS (INSERT INTO pgherald.journal_' || part || ' (id, last_id, event_count, txid, event) '
            || 'SELECT min(event_id), nullif(max(event_id), min(event_id)), nullif(count(*), 1), $3, string_agg(event, chr(30)) '
            || 'FROM (SELECT sum(octet_length(e.event) + 10486) OVER (ROWS UNBOUNDED PRECEDING) / 1048576 AS batch, e.event_id, e.event '
            || 'FROM (' || pgherald.statement_events_query(TG_OP, TG_ARGV, TG_RELID) || ') AS e ORDER BY 1, 2) AS b GROUP BY batch '
            || 'RETURNING id, coalesce(last_id, id) AS through, CASE WHEN octet_length(event) < $4 THEN event END AS fitting) '
            || 'SELECT count(*), min(id), max(through), min(fitting) FROM written'
            INTO batches, first_id, through_id, payload
            USING head, tail, transaction_id, pgherald.notify_limit();
        PERFORM pgherald.restore_settings(previous_settings);
        IF batches = 0 THEN
            RETURN NULL;
        END IF;
    END IF;
    IF bell = 0 THEN
        RETURN NULL;
    END IF;
    IF batches > 1 OR payload IS NULL OR octet_length(payload) >= pgherald.notify_limit() THEN
        payload := concat('{"ref":"', first_id, '",', CASE WHEN through_id > first_id THEN concat('"through":"', through_id, '",') END,
                          '"txid":"', transaction_id, '"}');
    END IF;
    PERFORM pgherald.ring(payload);
    RETURN NULL;
END
$fn$;

-- Notify-only publisher, once per statement (version 6): the events go out
-- packed into as few notifications as hold them, separated by U+001E. An
-- event too large for one goes out without row data, marked as omitted.
CREATE OR REPLACE FUNCTION pgherald.publish_statement() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $fn$
DECLARE
    transaction_id xid8 := pg_current_xact_id();
    head text := pgherald.event_head(TG_OP, TG_TABLE_SCHEMA, TG_TABLE_NAME);
    tail text := pgherald.event_tail(transaction_id);
    limit_bytes int := pgherald.notify_limit();
    channel text := (SELECT value FROM pgherald.setting WHERE name = 'channel');
    changed int;
    new_rows json[];
    old_rows json[];
    new_row json;
    old_row json;
    events refcursor;
    built record;
    event text;
    packed text := '';
    previous_settings text[];
BEGIN
    IF pgherald.has_virtual_columns(TG_RELID) THEN
        -- Virtual generated columns read as null from transition tables:
        -- only the query that names every column computes them.
        changed := 65;
    ELSE
        -- One row, the common case, is told apart by asking for a second and
        -- then read plainly: cheaper than counting and gathering in one query.
        IF TG_OP = 'DELETE' THEN
            PERFORM FROM pgherald_old OFFSET 1 LIMIT 1;
        ELSE
            PERFORM FROM pgherald_new OFFSET 1 LIMIT 1;
        END IF;
        IF NOT FOUND THEN
            IF TG_OP <> 'DELETE' THEN
                SELECT row_to_json(t.*) INTO new_row FROM pgherald_new AS t;
            END IF;
            IF TG_OP <> 'INSERT' THEN
                SELECT row_to_json(t.*) INTO old_row FROM pgherald_old AS t;
            END IF;
            IF NOT FOUND THEN
                RETURN NULL;
            END IF;
            changed := 1;
        ELSE
            -- Up to 65 rows: enough to tell a few from many.
            IF TG_OP <> 'DELETE' THEN
                SELECT count(*), array_agg(r) INTO changed, new_rows FROM (SELECT row_to_json(t.*) AS r FROM pgherald_new AS t LIMIT 65) AS s;
            END IF;
            IF TG_OP <> 'INSERT' THEN
                SELECT count(*), array_agg(r) INTO changed, old_rows FROM (SELECT row_to_json(t.*) AS r FROM pgherald_old AS t LIMIT 65) AS s;
            END IF;
        END IF;
    END IF;
    IF changed = 1 THEN
        -- A single row, the common case, runs no dynamic query.
        OPEN events FOR
            SELECT e.event_id, e.key,
                   concat('{"id":"', e.event_id, '"', head, e.key, ',"new":', coalesce(new_row::text, 'null'),
                          ',"old":', coalesce(old_row::text, 'null'), tail) AS event
              FROM (SELECT nextval('pgherald.event_id') AS event_id, pgherald.event_key(coalesce(new_row, old_row), TG_ARGV) AS key) AS e;
    ELSIF changed <= 64 THEN
        OPEN events FOR SELECT e.event_id, e.key, e.event FROM pgherald.few_statement_events(new_rows, old_rows, head, tail, TG_ARGV) AS e;
    ELSE
        -- Many rows are packed in one query. Events close a notification
        -- each time their lengths (with a separator) pass a multiple of half
        -- the limit, so none reaches it; an event of half the limit or more
        -- counts as exactly half and goes alone. The key, twice the multiple
        -- and one more for the events that share, keeps the events' order.
        -- Sorted as in publish_statement_durable.
        previous_settings := pgherald.settings_for_many_rows();
        FOR packed IN EXECUTE
            'SELECT string_agg(event, chr(30)) FROM ('
            || 'SELECT event_id, event, sum(least(size, $3 / 2)) OVER (ROWS UNBOUNDED PRECEDING) / ($3 / 2) * 2 '
            || '+ CASE WHEN size >= $3 / 2 THEN 0 ELSE 1 END AS pack FROM ('
            || 'SELECT f.event_id, f.event, octet_length(f.event) + 1 AS size FROM ('
            || 'SELECT e.event_id, CASE WHEN octet_length(e.event) < $3 THEN e.event ELSE concat(''{"id":"'', e.event_id, ''"'', $1, '
            || 'CASE WHEN octet_length(e.key) < $3 - 1024 THEN e.key ELSE ''null'' END, '',"new":null,"old":null,"omitted":true'', $2) END AS event '
            || 'FROM (' || pgherald.statement_events_query(TG_OP, TG_ARGV, TG_RELID) || ') AS e) AS f) AS s '
            || 'ORDER BY pack, event_id) AS p GROUP BY pack ORDER BY pack'
            USING head, tail, limit_bytes
        LOOP
            PERFORM pg_notify(channel, packed);
        END LOOP;
        PERFORM pgherald.restore_settings(previous_settings);
        RETURN NULL;
    END IF;
    LOOP
        FETCH events INTO built;
        EXIT WHEN NOT FOUND;
        event := built.event;
        IF octet_length(event) >= limit_bytes THEN
            event := concat('{"id":"', built.event_id, '"', head,
                            CASE WHEN octet_length(built.key) < limit_bytes - 1024 THEN built.key ELSE 'null' END,
                            ',"new":null,"old":null,"omitted":true', tail);
        END IF;
        IF packed = '' THEN
            packed := event;
        ELSIF octet_length(packed) + 1 + octet_length(event) < limit_bytes THEN
            packed := packed || chr(30) || event;
        ELSE
            PERFORM pg_notify(channel, packed);
            packed := event;
        END IF;
    END LOOP;
    CLOSE events;
    PERFORM pg_notify(channel, packed);
    RETURN NULL;
END
$fn$;

-- Whether the statement triggers call the native library's functions,
-- as the install that last ran found it (the `native` setting).
CREATE OR REPLACE FUNCTION pgherald.native_triggers() RETURNS boolean
LANGUAGE sql STABLE AS $$ SELECT coalesce((SELECT value = 'yes' FROM pgherald.setting WHERE name = 'native'), false) $$;

-- Names of pgherald's triggers: one per operation, run once per statement
-- with its transition table; or, where a statement's transition table would
-- miss rows or name another table (partitioned tables, and inheritance
-- parents and children), one run for each row. Then TRUNCATE.
CREATE OR REPLACE FUNCTION pgherald.trigger_names() RETURNS name[]
LANGUAGE sql IMMUTABLE AS $$ SELECT ARRAY['pgherald_insert', 'pgherald_update', 'pgherald_delete', 'pgherald_row', 'pgherald_truncate']::name[] $$;

-- Creates or refreshes the triggers on one table, with its current primary key.
CREATE OR REPLACE FUNCTION pgherald.attach_trigger(target regclass) RETURNS void
LANGUAGE plpgsql AS $fn$
DECLARE
    key_arguments text;
    durable boolean := pgherald.durability() = 'durable';
    statement_function text := CASE WHEN durable THEN 'pgherald.publish_statement_durable' ELSE 'pgherald.publish_statement' END
                               || CASE WHEN pgherald.native_triggers() THEN '_native' ELSE '' END;
    per_row boolean;
    stale name;
BEGIN
    SELECT string_agg(quote_literal(a.attname), ', ' ORDER BY array_position(i.indkey::int2[], a.attnum))
      INTO key_arguments
      FROM pg_index i
      JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = ANY (i.indkey::int2[])
     WHERE i.indrelid = target AND i.indisprimary;
    SELECT c.relkind = 'p' OR c.relhassubclass OR EXISTS (SELECT FROM pg_inherits WHERE inhrelid = target)
      INTO per_row FROM pg_class c WHERE c.oid = target;
    -- Drops the other kind's triggers, only where they exist: IF EXISTS would
    -- send a notice to every CREATE TABLE.
    FOR stale IN
        SELECT tgname FROM pg_trigger
         WHERE tgrelid = target AND NOT tgisinternal
           AND tgname = ANY (CASE WHEN per_row THEN ARRAY['pgherald_insert', 'pgherald_update', 'pgherald_delete']::name[]
                                  ELSE ARRAY['pgherald_row']::name[] END)
    LOOP
        EXECUTE format('DROP TRIGGER %I ON %s', stale, target);
    END LOOP;
    -- A partitioned table's row trigger, which PostgreSQL clones to every
    -- partition (attached later and sub-partitions too), names the table its
    -- rows publish under (version 12): '' then its schema and name, before the
    -- key's columns. Its partitions' changes publish under it, as Supabase's
    -- publish_via_partition_root does, so that a subscription to it gets them
    -- and its policies and privileges judge them.
    SELECT CASE WHEN c.relkind = 'p'
                THEN concat_ws(', ', quote_literal(''), quote_literal(n.nspname), quote_literal(c.relname), key_arguments)
                ELSE key_arguments END
      INTO key_arguments
      FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace WHERE c.oid = target;
    IF per_row THEN
        EXECUTE format(
            'CREATE OR REPLACE TRIGGER pgherald_row AFTER INSERT OR UPDATE OR DELETE ON %s '
            'FOR EACH ROW EXECUTE FUNCTION %s(%s)', target,
            CASE WHEN durable THEN 'pgherald.publish_row_durable' ELSE 'pgherald.publish_row' END,
            coalesce(key_arguments, ''));
    ELSE
        EXECUTE format(
            'CREATE OR REPLACE TRIGGER pgherald_insert AFTER INSERT ON %s REFERENCING NEW TABLE AS pgherald_new '
            'FOR EACH STATEMENT EXECUTE FUNCTION %s(%s)', target,
            statement_function, coalesce(key_arguments, ''));
        EXECUTE format(
            'CREATE OR REPLACE TRIGGER pgherald_update AFTER UPDATE ON %s REFERENCING OLD TABLE AS pgherald_old NEW TABLE AS pgherald_new '
            'FOR EACH STATEMENT EXECUTE FUNCTION %s(%s)', target,
            statement_function, coalesce(key_arguments, ''));
        EXECUTE format(
            'CREATE OR REPLACE TRIGGER pgherald_delete AFTER DELETE ON %s REFERENCING OLD TABLE AS pgherald_old '
            'FOR EACH STATEMENT EXECUTE FUNCTION %s(%s)', target,
            statement_function, coalesce(key_arguments, ''));
    END IF;
    EXECUTE format(
        'CREATE OR REPLACE TRIGGER pgherald_truncate AFTER TRUNCATE ON %s '
        'FOR EACH STATEMENT EXECUTE FUNCTION pgherald.publish_truncate()', target);
END
$fn$;

-- Tables that should be watched: ordinary and partitioned tables (not
-- partitions, which inherit the parent's trigger) in watched schemas, minus exclusions.
CREATE OR REPLACE VIEW pgherald.candidate_table AS
SELECT c.oid::regclass AS target, n.nspname AS schema_name, c.relname AS table_name
  FROM pg_class c
  JOIN pg_namespace n ON n.oid = c.relnamespace
 WHERE c.relkind IN ('r', 'p')
   AND NOT c.relispartition
   AND n.nspname <> 'pgherald'
   AND n.nspname IN (SELECT schema_name FROM pgherald.watched_schema)
   AND NOT EXISTS (
        SELECT 1 FROM pgherald.excluded_table e
         WHERE e.schema_name = n.nspname AND e.table_name = c.relname);

-- Attaches the triggers to every table of the watched schemas; returns how many.
CREATE OR REPLACE FUNCTION pgherald.attach_all() RETURNS int
LANGUAGE plpgsql AS $fn$
DECLARE
    candidate record;
    attached int := 0;
BEGIN
    FOR candidate IN SELECT target FROM pgherald.candidate_table LOOP
        PERFORM pgherald.attach_trigger(candidate.target);
        attached := attached + 1;
    END LOOP;
    RETURN attached;
END
$fn$;

-- Attaches the triggers to one table, in any schema, and lifts any exclusion.
CREATE OR REPLACE FUNCTION pgherald.attach(target regclass) RETURNS void
LANGUAGE plpgsql AS $fn$
BEGIN
    DELETE FROM pgherald.excluded_table e
     USING pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
     WHERE c.oid = target AND e.schema_name = n.nspname AND e.table_name = c.relname;
    PERFORM pgherald.attach_trigger(target);
END
$fn$;

CREATE OR REPLACE FUNCTION pgherald.detach(target regclass) RETURNS void
LANGUAGE plpgsql AS $fn$
DECLARE
    trigger_name name;
BEGIN
    FOR trigger_name IN
        SELECT tgname FROM pg_trigger WHERE tgrelid = target AND NOT tgisinternal AND tgname = ANY (pgherald.trigger_names())
    LOOP
        EXECUTE format('DROP TRIGGER %I ON %s', trigger_name, target);
    END LOOP;
END
$fn$;

-- Detaches every pgherald trigger; returns how many tables were detached.
CREATE OR REPLACE FUNCTION pgherald.detach_all() RETURNS int
LANGUAGE plpgsql AS $fn$
DECLARE
    watched record;
    detached int := 0;
BEGIN
    FOR watched IN SELECT DISTINCT tgrelid::regclass AS target FROM pg_trigger
                    WHERE tgname = ANY (pgherald.trigger_names()) AND NOT tgisinternal LOOP
        PERFORM pgherald.detach(watched.target);
        detached := detached + 1;
    END LOOP;
    RETURN detached;
END
$fn$;

-- Stops watching a table and keeps it unwatched, even when it is created again.
CREATE OR REPLACE FUNCTION pgherald.exclude(target regclass) RETURNS void
LANGUAGE plpgsql AS $fn$
BEGIN
    INSERT INTO pgherald.excluded_table (schema_name, table_name)
    SELECT n.nspname, c.relname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
     WHERE c.oid = target
    ON CONFLICT DO NOTHING;
    PERFORM pgherald.detach(target);
END
$fn$;

-- Adds schemas to the watched set and attaches to their tables.
CREATE OR REPLACE FUNCTION pgherald.watch(schemas name[]) RETURNS int
LANGUAGE plpgsql AS $fn$
DECLARE
    schema_name name;
BEGIN
    FOREACH schema_name IN ARRAY schemas LOOP
        IF schema_name = 'pgherald' THEN
            RAISE EXCEPTION 'pgherald does not watch its own schema';
        END IF;
        IF NOT EXISTS (SELECT 1 FROM pg_namespace WHERE nspname = schema_name) THEN
            RAISE EXCEPTION 'schema "%" does not exist', schema_name
                USING HINT = 'Create the schema first, or name an existing one.';
        END IF;
        INSERT INTO pgherald.watched_schema VALUES (schema_name) ON CONFLICT DO NOTHING;
    END LOOP;
    RETURN pgherald.attach_all();
END
$fn$;

-- Tables that publish now, with their primary-key columns (the `pk` of their events).
CREATE OR REPLACE FUNCTION pgherald.watched_tables()
RETURNS TABLE (schema_name name, table_name name, primary_key name[])
LANGUAGE sql STABLE AS $fn$
    SELECT n.nspname, c.relname,
           (SELECT array_agg(a.attname ORDER BY array_position(i.indkey::int2[], a.attnum))
              FROM pg_index i
              JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = ANY (i.indkey::int2[])
             WHERE i.indrelid = c.oid AND i.indisprimary)
      FROM pg_trigger t
      JOIN pg_class c ON c.oid = t.tgrelid
      JOIN pg_namespace n ON n.oid = c.relnamespace
     WHERE t.tgname IN ('pgherald_row', 'pgherald_insert') AND NOT t.tgisinternal
     ORDER BY 1, 2
$fn$;

-- The native library (native/pgherald.c, version 7) publishes without
-- plpgsql every durable statement and a notify-only statement of one row,
-- and hands any other statement to the plpgsql function of the same mode, so
-- the events are the same either way. In durable mode it holds a transaction's notifications
-- until pre-commit (version 9), so that a transaction prepared while a
-- daemon is parked still prepares; pgherald.ring, through which the plpgsql
-- functions ring in durable mode, is then the library's too, and keeps
-- their notifications in order with its own. Without the library,
-- pgherald.ring notifies at once. Creating its functions needs a superuser and the library
-- in the server's $libdir, of this publisher version. Where it cannot be
-- used, functions left from an earlier install are dropped once no trigger
-- calls them: a write through a missing library would fail.
DO $native$
DECLARE
    wanted text := (SELECT value FROM pgherald.setting WHERE name = 'triggers');
    reason text;
    kept boolean := false;
    target regclass;
BEGIN
    IF wanted <> 'plpgsql' THEN
        BEGIN
            CREATE OR REPLACE FUNCTION pgherald.native_version() RETURNS int
                LANGUAGE c IMMUTABLE AS '$libdir/pgherald', 'pgherald_native_version';
            IF pgherald.native_version() <> pgherald.version() THEN
                RAISE EXCEPTION 'the server''s pgherald library writes version % events, and this install is version %',
                    pgherald.native_version(), pgherald.version()
                    USING ERRCODE = 'object_not_in_prerequisite_state';
            END IF;
            CREATE OR REPLACE FUNCTION pgherald.publish_statement_durable_native() RETURNS trigger
                LANGUAGE c AS '$libdir/pgherald', 'pgherald_publish_statement_durable';
            CREATE OR REPLACE FUNCTION pgherald.publish_statement_native() RETURNS trigger
                LANGUAGE c AS '$libdir/pgherald', 'pgherald_publish_statement';
            CREATE OR REPLACE FUNCTION pgherald.ring(payload text) RETURNS void
                LANGUAGE c AS '$libdir/pgherald', 'pgherald_ring';
        EXCEPTION
            WHEN insufficient_privilege THEN
                -- Only a superuser creates them: a superuser's earlier install stays as it was.
                IF to_regprocedure('pgherald.publish_statement_native()') IS NULL THEN
                    reason := SQLERRM;
                ELSE
                    kept := true;
                END IF;
            WHEN undefined_file OR object_not_in_prerequisite_state THEN
                reason := SQLERRM;
        END;
    END IF;
    IF wanted = 'native' AND reason IS NOT NULL THEN
        RAISE EXCEPTION 'pgherald: native triggers were asked for, but %', reason
            USING HINT = 'Install the library on the database server (make -C native install, as root) and install as a superuser, '
                         'or install with --triggers auto or plpgsql.';
    END IF;
    IF NOT kept THEN
        INSERT INTO pgherald.setting VALUES ('native', CASE WHEN wanted <> 'plpgsql' AND reason IS NULL THEN 'yes' ELSE 'no' END)
        ON CONFLICT (name) DO UPDATE SET value = excluded.value;
    END IF;
    IF reason IS NOT NULL THEN
        RAISE NOTICE 'pgherald: the triggers run in plpgsql: %', reason;
    END IF;
    -- Kept from a superuser's install, the library's own ring stays; one from
    -- before version 9 had none.
    IF NOT pgherald.native_triggers() OR to_regprocedure('pgherald.ring(text)') IS NULL THEN
        CREATE OR REPLACE FUNCTION pgherald.ring(payload text) RETURNS void
        LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $ring$
        BEGIN
            PERFORM pg_notify((SELECT value FROM pgherald.setting WHERE name = 'channel'), payload);
        END
        $ring$;
    END IF;
    -- Without the library, triggers that call it move to plpgsql. (The
    -- other way, watched tables move when they are attached below.)
    FOR target IN
        SELECT DISTINCT t.tgrelid::regclass
          FROM pg_trigger t
          JOIN pg_proc p ON p.oid = t.tgfoid
         WHERE p.pronamespace = 'pgherald'::regnamespace AND p.proname LIKE '%\_native'
           AND NOT pgherald.native_triggers()
    LOOP
        PERFORM pgherald.attach_trigger(target);
    END LOOP;
    IF NOT pgherald.native_triggers() AND NOT kept THEN
        DROP FUNCTION IF EXISTS pgherald.publish_statement_durable_native();
        DROP FUNCTION IF EXISTS pgherald.publish_statement_native();
        DROP FUNCTION IF EXISTS pgherald.native_version();
    END IF;
END
$native$;

-- Watches tables created (or altered) after install; ALTER TABLE refreshes the
-- primary-key columns of tables that are already watched.
CREATE OR REPLACE FUNCTION pgherald.on_ddl_command_end() RETURNS event_trigger
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $fn$
DECLARE
    changed record;
BEGIN
    FOR changed IN
        SELECT DISTINCT d.objid, d.command_tag
          FROM pg_event_trigger_ddl_commands() d
         WHERE d.classid = 'pg_class'::regclass AND d.object_type IN ('table', 'table column')
    LOOP
        IF EXISTS (SELECT 1 FROM pgherald.candidate_table WHERE target = changed.objid)
           AND (changed.command_tag <> 'ALTER TABLE'
                OR EXISTS (SELECT 1 FROM pg_trigger WHERE tgrelid = changed.objid AND tgname IN ('pgherald_row', 'pgherald_insert')))
        THEN
            PERFORM pgherald.attach_trigger(changed.objid::regclass);
        END IF;
        -- A partition detached from a watched table keeps being watched
        -- (version 7): the command names only the parent, and the partition
        -- lost the triggers it had from it, so every unwatched candidate is
        -- attached, as attach_all() would.
        IF changed.command_tag = 'ALTER TABLE'
           AND EXISTS (SELECT FROM pg_class WHERE oid = changed.objid AND relkind = 'p')
           AND EXISTS (SELECT FROM pgherald.candidate_table WHERE target = changed.objid) THEN
            PERFORM pgherald.attach_trigger(c.target)
               FROM pgherald.candidate_table c
              WHERE NOT EXISTS (SELECT FROM pg_trigger t WHERE t.tgrelid = c.target AND t.tgname IN ('pgherald_row', 'pgherald_insert'));
        END IF;
        -- A watched table that gains an inheritance child changes to one run per row.
        PERFORM pgherald.attach_trigger(i.inhparent::regclass)
           FROM pg_inherits i
          WHERE i.inhrelid = changed.objid
            AND EXISTS (SELECT 1 FROM pg_trigger WHERE tgrelid = i.inhparent AND tgname = 'pgherald_insert');
    END LOOP;
END
$fn$;

-- Event triggers need a superuser; without one, new tables need attach_all().
DO $event_trigger$
BEGIN
    IF (SELECT rolsuper FROM pg_roles WHERE rolname = current_user) THEN
        DROP EVENT TRIGGER IF EXISTS pgherald_watch_new_tables;
        CREATE EVENT TRIGGER pgherald_watch_new_tables ON ddl_command_end
            WHEN TAG IN ('CREATE TABLE', 'CREATE TABLE AS', 'SELECT INTO', 'ALTER TABLE')
            EXECUTE FUNCTION pgherald.on_ddl_command_end();
    ELSE
        RAISE WARNING 'pgherald: installed without a superuser, so tables created later are not watched automatically'
            USING HINT = 'Run SELECT pgherald.attach_all() after creating tables, or install as a superuser.';
    END IF;
END
$event_trigger$;

-- Nothing of pgherald is open to other roles (version 7): writers reach it
-- only through the triggers, which run as its owner, and only the owner
-- reads the journal and the channel. Grants an operator made by hand stay.
REVOKE ALL ON SCHEMA pgherald FROM PUBLIC;
REVOKE ALL ON ALL TABLES IN SCHEMA pgherald FROM PUBLIC;
REVOKE ALL ON ALL SEQUENCES IN SCHEMA pgherald FROM PUBLIC;
REVOKE ALL ON ALL FUNCTIONS IN SCHEMA pgherald FROM PUBLIC;
-- Roles that run serve without owning the schema (pgherald install
-- --daemon-role): kept here, so that every later install grants them what
-- it added too. serve reads the journal and empties its parts (TRUNCATE,
-- under LOCK), keeps cursors and checkpoints, and calls the functions.
CREATE TABLE IF NOT EXISTS pgherald.daemon_role (role_name name PRIMARY KEY);
REVOKE ALL ON pgherald.daemon_role FROM PUBLIC;
DO $daemon_roles$
DECLARE
    requested text := nullif(current_setting('pgherald.daemon_roles', true), '');
    missing name;
    daemon name;
BEGIN
    IF requested IS NOT NULL THEN
        SELECT wanted INTO missing FROM json_array_elements_text(requested::json) AS wanted
         WHERE NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = wanted) LIMIT 1;
        IF missing IS NOT NULL THEN
            RAISE EXCEPTION 'pgherald: no role % to grant what serve needs', missing
                USING ERRCODE = 'undefined_object', HINT = format('CREATE ROLE %I LOGIN, then run install again.', missing);
        END IF;
        INSERT INTO pgherald.daemon_role SELECT json_array_elements_text(requested::json) ON CONFLICT DO NOTHING;
    END IF;
    FOR daemon IN SELECT role_name FROM pgherald.daemon_role WHERE EXISTS (SELECT 1 FROM pg_roles WHERE rolname = role_name) LOOP
        EXECUTE format('GRANT USAGE ON SCHEMA pgherald TO %I', daemon);
        EXECUTE format('GRANT SELECT, INSERT, UPDATE, DELETE, TRUNCATE ON ALL TABLES IN SCHEMA pgherald TO %I', daemon);
        EXECUTE format('GRANT USAGE, SELECT, UPDATE ON ALL SEQUENCES IN SCHEMA pgherald TO %I', daemon);
        EXECUTE format('GRANT EXECUTE ON ALL FUNCTIONS IN SCHEMA pgherald TO %I', daemon);
    END LOOP;
END
$daemon_roles$;


DO $watch$
DECLARE
    requested text := nullif(current_setting('pgherald.schemas', true), '');
BEGIN
    IF requested IS NOT NULL THEN
        PERFORM pgherald.watch(ARRAY(SELECT json_array_elements_text(requested::json))::name[]);
    ELSIF NOT EXISTS (SELECT 1 FROM pgherald.watched_schema) THEN
        PERFORM pgherald.watch(ARRAY['public']::name[]);
    ELSE
        PERFORM pgherald.attach_all();
    END IF;
END
$watch$;

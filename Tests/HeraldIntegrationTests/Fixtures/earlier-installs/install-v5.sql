-- pgherald publisher: triggers that send every row change with pg_notify and,
-- in durable mode, also write it to a journal in the same transaction.
--
-- Version 4. Idempotent: running it again upgrades in place and keeps the
-- watched schemas, exclusions and durability. Apply in one transaction:
--     psql -v ON_ERROR_STOP=1 -1 -f sql/install.sql
-- Watched schemas: the `pgherald.schemas` setting (a JSON array of names)
-- when set, else `public` on a first install. Durability: the
-- `pgherald.durability` setting (`durable` or `notify-only`) when set, else
-- what was installed before, else `durable`. `pgherald install --schema S
-- --durability D` sets both for you.

DO $check$
BEGIN
    IF current_setting('server_version_num')::int < 130000 THEN
        RAISE EXCEPTION 'pgherald needs PostgreSQL 13 or later (this server is %)', current_setting('server_version');
    END IF;
END
$check$;

-- Serialises concurrent installs; released at the end of the transaction.
DO $lock$ BEGIN PERFORM pg_advisory_xact_lock(hashtext('pgherald.install')); END $lock$;

CREATE SCHEMA IF NOT EXISTS pgherald;
COMMENT ON SCHEMA pgherald IS 'pgherald change publisher (see sql/install.sql)';

CREATE OR REPLACE FUNCTION pgherald.version() RETURNS int
LANGUAGE sql IMMUTABLE AS $$ SELECT 5 $$;

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

-- `durable` or `notify-only`: whether the triggers also write the journal.
CREATE OR REPLACE FUNCTION pgherald.durability() RETURNS text
LANGUAGE sql STABLE AS $$ SELECT value FROM pgherald.setting WHERE name = 'durability' $$;

-- Durable mode: every event, written in the same transaction as the change it
-- describes. The daemon reads it after any gap in LISTEN, and for rows too
-- large for a notification. Catch-up selects by transaction id against
-- snapshots (see the daemon's Journal), so commit order never hides a row.
CREATE TABLE IF NOT EXISTS pgherald.journal (
    id bigint PRIMARY KEY,
    txid xid8 NOT NULL,
    event text NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX IF NOT EXISTS journal_txid_id ON pgherald.journal (txid, id);

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

-- Notify-only publisher: the notification is the only record of the change.
-- A row too large to notify must never fail the user's write, so its event
-- goes out without row data, marked as omitted.
CREATE OR REPLACE FUNCTION pgherald.publish_row() RETURNS trigger
LANGUAGE plpgsql AS $fn$
DECLARE
    event_id bigint := nextval('pgherald.event_id');
    txid xid8 := pg_current_xact_id();
    -- NEW is null for DELETE, OLD for INSERT.
    new_row json := row_to_json(NEW);
    old_row json := row_to_json(OLD);
    payload text := pgherald.row_event(event_id, txid, TG_OP, TG_TABLE_SCHEMA, TG_TABLE_NAME, TG_ARGV, new_row, old_row, false);
BEGIN
    IF octet_length(payload) >= pgherald.notify_limit() THEN
        payload := pgherald.row_event(event_id, txid, TG_OP, TG_TABLE_SCHEMA, TG_TABLE_NAME, TG_ARGV, new_row, old_row, true);
        IF octet_length(payload) >= pgherald.notify_limit() THEN
            payload := pgherald.row_event(event_id, txid, TG_OP, TG_TABLE_SCHEMA, TG_TABLE_NAME, '{}', NULL, NULL, true);
        END IF;
        payload := left(payload, -1) || ', "omitted" : true}';
    END IF;
    PERFORM pg_notify('pgherald', payload);
    RETURN NULL;
END
$fn$;

-- Durable publisher: the journal row commits or rolls back with the change.
-- The notification carries the event for low latency, or, when the event is
-- too large for one, a reference the daemon resolves from the journal.
CREATE OR REPLACE FUNCTION pgherald.publish_row_durable() RETURNS trigger
LANGUAGE plpgsql AS $fn$
DECLARE
    event_id bigint := nextval('pgherald.event_id');
    txid xid8 := pg_current_xact_id();
    payload text := pgherald.row_event(
        event_id, txid, TG_OP, TG_TABLE_SCHEMA, TG_TABLE_NAME, TG_ARGV, row_to_json(NEW), row_to_json(OLD), false);
BEGIN
    INSERT INTO pgherald.journal (id, txid, event) VALUES (event_id, txid, payload);
    IF octet_length(payload) >= pgherald.notify_limit() THEN
        payload := json_build_object('ref', event_id::text, 'txid', txid::text)::text;
    END IF;
    PERFORM pg_notify('pgherald', payload);
    RETURN NULL;
END
$fn$;

CREATE OR REPLACE FUNCTION pgherald.publish_truncate() RETURNS trigger
LANGUAGE plpgsql AS $fn$
DECLARE
    event_id bigint := nextval('pgherald.event_id');
    txid xid8 := pg_current_xact_id();
    payload text := pgherald.row_event(event_id, txid, TG_OP, TG_TABLE_SCHEMA, TG_TABLE_NAME, '{}', NULL, NULL, false);
BEGIN
    IF pgherald.durability() = 'durable' THEN
        INSERT INTO pgherald.journal (id, txid, event) VALUES (event_id, txid, payload);
    END IF;
    PERFORM pg_notify('pgherald', payload);
    RETURN NULL;
END
$fn$;

-- Creates or refreshes both triggers on one table, with its current primary key.
CREATE OR REPLACE FUNCTION pgherald.attach_trigger(target regclass) RETURNS void
LANGUAGE plpgsql AS $fn$
DECLARE
    key_arguments text;
BEGIN
    SELECT string_agg(quote_literal(a.attname), ', ' ORDER BY array_position(i.indkey::int2[], a.attnum))
      INTO key_arguments
      FROM pg_index i
      JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = ANY (i.indkey::int2[])
     WHERE i.indrelid = target AND i.indisprimary;
    EXECUTE format(
        'CREATE OR REPLACE TRIGGER pgherald_row AFTER INSERT OR UPDATE OR DELETE ON %s '
        'FOR EACH ROW EXECUTE FUNCTION %s(%s)', target,
        CASE pgherald.durability() WHEN 'durable' THEN 'pgherald.publish_row_durable' ELSE 'pgherald.publish_row' END,
        coalesce(key_arguments, ''));
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
BEGIN
    EXECUTE format('DROP TRIGGER IF EXISTS pgherald_row ON %s', target);
    EXECUTE format('DROP TRIGGER IF EXISTS pgherald_truncate ON %s', target);
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
                    WHERE tgname IN ('pgherald_row', 'pgherald_truncate') AND NOT tgisinternal LOOP
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
     WHERE t.tgname = 'pgherald_row' AND NOT t.tgisinternal
     ORDER BY 1, 2
$fn$;

-- Watches tables created (or altered) after install; ALTER TABLE refreshes the
-- primary-key columns of tables that are already watched.
CREATE OR REPLACE FUNCTION pgherald.on_ddl_command_end() RETURNS event_trigger
LANGUAGE plpgsql AS $fn$
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
                OR EXISTS (SELECT 1 FROM pg_trigger WHERE tgrelid = changed.objid AND tgname = 'pgherald_row'))
        THEN
            PERFORM pgherald.attach_trigger(changed.objid::regclass);
        END IF;
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

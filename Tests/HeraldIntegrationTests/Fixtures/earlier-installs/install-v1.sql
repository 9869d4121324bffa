-- pgherald publisher: triggers that send every row change with pg_notify.
--
-- Version 1. Idempotent: running it again upgrades in place and keeps the
-- watched schemas and exclusions. Apply in one transaction:
--     psql -v ON_ERROR_STOP=1 -1 -f sql/install.sql
-- Watched schemas: the `pgherald.schemas` setting (a JSON array of names)
-- when set, else `public` on a first install. `pgherald install --schema S`
-- sets it for you.

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
LANGUAGE sql IMMUTABLE AS $$ SELECT 1 $$;

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

-- Row-level publisher. The trigger's arguments are the primary-key columns,
-- captured when the trigger is attached (and refreshed on ALTER TABLE), so no
-- catalog lookup happens per row.
CREATE OR REPLACE FUNCTION pgherald.publish_row() RETURNS trigger
LANGUAGE plpgsql AS $fn$
DECLARE
    event_id text := nextval('pgherald.event_id')::text;
    txid text := pg_current_xact_id()::text;
    at text := to_char(clock_timestamp() AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"');
    -- NOTIFY rejects payloads of BLCKSZ - NAMEDATALEN - 128 bytes or more.
    payload_limit int := current_setting('block_size')::int - 192;
    new_row json;
    old_row json;
    key json;
    payload text;
BEGIN
    IF TG_OP <> 'DELETE' THEN new_row := row_to_json(NEW); END IF;
    IF TG_OP <> 'INSERT' THEN old_row := row_to_json(OLD); END IF;
    IF TG_NARGS > 0 THEN
        SELECT json_object_agg(column_name, coalesce(new_row, old_row) -> column_name)
          INTO key
          FROM unnest(TG_ARGV) AS column_name;
    END IF;
    payload := json_build_object(
        'id', event_id, 'op', TG_OP, 'schema', TG_TABLE_SCHEMA, 'table', TG_TABLE_NAME,
        'pk', key, 'new', new_row, 'old', old_row, 'txid', txid, 'at', at)::text;
    -- A row too large to notify must never fail the user's write: send the
    -- event without row data, marked as omitted.
    IF octet_length(payload) >= payload_limit THEN
        payload := json_build_object(
            'id', event_id, 'op', TG_OP, 'schema', TG_TABLE_SCHEMA, 'table', TG_TABLE_NAME,
            'pk', key, 'new', NULL, 'old', NULL, 'txid', txid, 'at', at, 'omitted', true)::text;
        IF octet_length(payload) >= payload_limit THEN
            payload := json_build_object(
                'id', event_id, 'op', TG_OP, 'schema', TG_TABLE_SCHEMA, 'table', TG_TABLE_NAME,
                'pk', NULL, 'new', NULL, 'old', NULL, 'txid', txid, 'at', at, 'omitted', true)::text;
        END IF;
    END IF;
    PERFORM pg_notify('pgherald', payload);
    RETURN NULL;
END
$fn$;

CREATE OR REPLACE FUNCTION pgherald.publish_truncate() RETURNS trigger
LANGUAGE plpgsql AS $fn$
BEGIN
    PERFORM pg_notify('pgherald', json_build_object(
        'id', nextval('pgherald.event_id')::text, 'op', TG_OP,
        'schema', TG_TABLE_SCHEMA, 'table', TG_TABLE_NAME,
        'pk', NULL, 'new', NULL, 'old', NULL,
        'txid', pg_current_xact_id()::text,
        'at', to_char(clock_timestamp() AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"'))::text);
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
        'FOR EACH ROW EXECUTE FUNCTION pgherald.publish_row(%s)', target, coalesce(key_arguments, ''));
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

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


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

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


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


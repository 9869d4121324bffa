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


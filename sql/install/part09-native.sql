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


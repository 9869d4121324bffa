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


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

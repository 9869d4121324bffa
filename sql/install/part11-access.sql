-- Nothing of pgherald is open to other roles (version 7): writers reach it
-- only through the triggers, which run as its owner, and only the owner
-- reads the journal and the channel. Grants an operator made by hand stay.
REVOKE ALL ON SCHEMA pgherald FROM PUBLIC;
REVOKE ALL ON ALL TABLES IN SCHEMA pgherald FROM PUBLIC;
REVOKE ALL ON ALL SEQUENCES IN SCHEMA pgherald FROM PUBLIC;
REVOKE ALL ON ALL FUNCTIONS IN SCHEMA pgherald FROM PUBLIC;

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

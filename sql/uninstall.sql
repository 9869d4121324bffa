-- Removes pgherald from a database: the event trigger, every pgherald trigger
-- on user tables (they depend on pgherald's functions) and the pgherald
-- schema. User tables and their data are untouched. Idempotent.
DROP EVENT TRIGGER IF EXISTS pgherald_watch_new_tables;
DROP SCHEMA IF EXISTS pgherald CASCADE;

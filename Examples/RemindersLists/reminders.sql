-- Reminder lists and their reminders, for the RemindersLists example: each
-- list with its reminders, as one live query. Load with:
--     psql -v ON_ERROR_STOP=1 -f Examples/RemindersLists/reminders.sql

CREATE TABLE reminders_list (
    id SERIAL PRIMARY KEY,
    title TEXT NOT NULL
);

CREATE TABLE reminder (
    id SERIAL PRIMARY KEY,
    list_id INT NOT NULL REFERENCES reminders_list(id) ON DELETE CASCADE,
    title TEXT NOT NULL,
    is_completed BOOLEAN NOT NULL DEFAULT false
);

INSERT INTO reminders_list (title) VALUES ('Groceries'), ('Work'), ('Garden');

INSERT INTO reminder (list_id, title) VALUES
(1, 'Milk'), (1, 'Bread'), (1, 'Eggs'),
(2, 'Send the report'), (2, 'Book the room'),
(3, 'Water the tomatoes');

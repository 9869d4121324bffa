-- Plant species and their seedlings, for the PlantSpecies example: a list,
-- and a detail view of one species that follows it. Load with:
--     psql -v ON_ERROR_STOP=1 -f Examples/PlantSpecies/plants.sql

CREATE TABLE species (
    id SERIAL PRIMARY KEY,
    name TEXT NOT NULL
);

CREATE TABLE seedling (
    id SERIAL PRIMARY KEY,
    species_id INT NOT NULL REFERENCES species(id) ON DELETE CASCADE,
    planted_on DATE NOT NULL,
    height_cm NUMERIC(5, 1)
);

INSERT INTO species (name) VALUES ('Tomato'), ('Basil'), ('Sunflower');

INSERT INTO seedling (species_id, planted_on, height_cm) VALUES
(1, '2026-03-01', 4.5),
(1, '2026-03-08', 2.0),
(2, '2026-03-02', 3.1),
(3, '2026-03-05', 10.2);

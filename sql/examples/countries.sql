-- The countries/cities example from pgherald's teaching series:
-- a one-to-many relationship with sample data. Load with:
--     psql -v ON_ERROR_STOP=1 -f sql/examples/countries.sql

-- Create the country table
CREATE TABLE Country (
    id SERIAL PRIMARY KEY,
    name VARCHAR(100) NOT NULL
);

-- Create the city table
CREATE TABLE City (
    id SERIAL PRIMARY KEY,
    name VARCHAR(100) NOT NULL,
    country_id INT NOT NULL,
    FOREIGN KEY (country_id) REFERENCES Country(id)
);

-- Insert sample data into the country table
INSERT INTO Country (name) VALUES ('Canada');
INSERT INTO Country (name) VALUES ('United States');
INSERT INTO Country (name) VALUES ('China');
INSERT INTO Country (name) VALUES ('Germany');
INSERT INTO Country (name) VALUES ('Mexico');

-- Insert sample data into the city table
INSERT INTO City (name, country_id) VALUES ('Toronto', 1);
INSERT INTO City (name, country_id) VALUES ('Vancouver', 1);
INSERT INTO City (name, country_id) VALUES ('New York', 2);
INSERT INTO City (name, country_id) VALUES ('Los Angeles', 2);
INSERT INTO City (name, country_id) VALUES ('Beijing', 3);
INSERT INTO City (name, country_id) VALUES ('Shanghai', 3);
INSERT INTO City (name, country_id) VALUES ('Berlin', 4);
INSERT INTO City (name, country_id) VALUES ('Munich', 4);
INSERT INTO City (name, country_id) VALUES ('Mexico City', 5);
INSERT INTO City (name, country_id) VALUES ('Guadalajara', 5);


-- The students/courses/enrols_in example from pgherald's teaching series:
-- a many-to-many relationship with sample data. Load with:
--     psql -v ON_ERROR_STOP=1 -f sql/examples/enrolment.sql

-- Create the student table
CREATE TABLE student (
    id SERIAL PRIMARY KEY,
    first_name VARCHAR(50),
    last_name VARCHAR(50)
);

-- Create the course table
CREATE TABLE course (
    id SERIAL PRIMARY KEY,
    short_code VARCHAR(10) UNIQUE,
    name VARCHAR(100)
);

-- Create the enrols_in table to represent the many-to-many relationship
CREATE TABLE enrols_in (
    student_id INT REFERENCES student(id),
    course_id INT REFERENCES course(id),
    PRIMARY KEY (student_id, course_id)
);


-- Insert sample courses
INSERT INTO course (short_code, name) VALUES
('ICS3U', 'Introduction to Computer Science'), -- id = 1
('MCR3U', 'Functions'), -- id = 2
('ENG3U', 'English'), -- id = 3
('SCH3U', 'Chemistry'), -- id = 4
('SPH3U', 'Physics'), -- id = 5
('SBI3U', 'Biology'), -- id = 6
('CGG3O', 'Travel and Tourism: A Regional Geographic Perspective'), -- id = 7
('CHW3M', 'World History to the End of the Fifteenth Century'), -- id = 8
('FSF3U', 'Core French'), -- id = 9
('AVI3M', 'Visual Arts'); -- id = 10

-- Insert sample students
INSERT INTO student (first_name, last_name) VALUES
('John', 'Doe'), -- id = 1
('Jane', 'Smith'), -- id = 2
('Emily', 'Jones'); -- id = 3

-- Insert sample enrolments ensuring each student is enrolled in exactly four courses including ENG3U and MCR3U
INSERT INTO enrols_in (student_id, course_id) VALUES
-- John Doe
(1, 3), -- ENG3U
(1, 2), -- MCR3U
(1, 1), -- ICS3U
(1, 4), -- SCH3U

-- Jane Smith
(2, 3), -- ENG3U
(2, 2), -- MCR3U
(2, 5), -- SPH3U
(2, 6), -- SBI3U

-- Emily Jones
(3, 3), -- ENG3U
(3, 2), -- MCR3U
(3, 7), -- CGG3O
(3, 8); -- CHW3M

/// Table shapes and statements that pgherald's triggers must publish
/// exactly, on every supported major: the write behaves as it does without
/// pgherald, and every event's row is the row as stored.
///
/// Shapes are created in two schemas, one watched and one not, and every
/// statement runs in both, unqualified, under the application role's odd
/// `search_path`.
enum TriggerCorpus {
    /// One step of the corpus: statements an application runs, or schema
    /// changes its owner makes, checked as one unit.
    struct Case: Sendable {
        enum Runner: Sendable {
            /// The application role, through libpq, one statement string.
            case application
            /// The application role, through psql (for COPY FROM STDIN), with this input.
            case psql(input: String)
            /// The schema's owner (a superuser), for DDL after install.
            case owner
        }

        var name: String
        var sql: String
        var runner: Runner = .application
    }

    /// Types, domains, enums, composites and an extension's types, per schema.
    static let types = #"""
        CREATE TYPE mood AS ENUM ('sad', 'ok', 'happy', 'ünï "code"');
        CREATE TYPE pair AS (x int, label text);
        CREATE DOMAIN posint AS int CHECK (VALUE > 0);
        CREATE DOMAIN shortlist AS int[] CHECK (cardinality(VALUE) < 10);
        CREATE DOMAIN pairdom AS pair CHECK ((VALUE).x IS NOT NULL);
        """#

    /// Every shape, created after `types` in each schema.
    static func shapes(major: Int) -> String {
        var sql = #"""
            CREATE TABLE types (
                id bigint PRIMARY KEY,
                ints int[], texts text[], grid int[][], d posint, dl shortlist, dp pairdom, e mood, c pair, moods mood[],
                r int4range, mr int4multirange, tr tstzrange,
                j json, jb jsonb, b bytea, n numeric, n2 numeric(20, 6), m money, iv interval,
                tz timestamptz, ts timestamp, t time, ttz timetz, dt date,
                tv tsvector, tq tsquery, x xml,
                pt point, ln line, ls lseg, bx box, pth path, pg polygon, ci circle,
                bt bit(4), vb varbit, u uuid, ip inet, net cidr, mac macaddr, mac8 macaddr8,
                f4 real, f8 double precision, bo boolean, ch char(3), vc varchar(5), tx text, i2 smallint, oi oid,
                h hstore, ct citext, cb cube
            );
            CREATE TABLE computed (
                id int GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
                a int NOT NULL DEFAULT 7,
                twice int GENERATED ALWAYS AS (a * 2) STORED,
                made timestamptz DEFAULT '2001-02-03 04:05:06+00',
                label text DEFAULT 'none'
            );
            CREATE TABLE dropped (gone int, id int PRIMARY KEY, also_gone text, v text);
            ALTER TABLE dropped DROP COLUMN gone, DROP COLUMN also_gone;
            CREATE TABLE part (id int, region text, v text, PRIMARY KEY (id, region)) PARTITION BY LIST (region);
            CREATE TABLE part_eu PARTITION OF part FOR VALUES IN ('eu') PARTITION BY RANGE (id);
            CREATE TABLE part_eu_low PARTITION OF part_eu FOR VALUES FROM (MINVALUE) TO (3);
            CREATE TABLE part_eu_high PARTITION OF part_eu FOR VALUES FROM (3) TO (MAXVALUE);
            CREATE TABLE part_us PARTITION OF part FOR VALUES IN ('us');
            CREATE TABLE part_other PARTITION OF part DEFAULT;
            CREATE TABLE animal (id int PRIMARY KEY, name text);
            CREATE TABLE dog (bark text) INHERITS (animal);
            CREATE UNLOGGED TABLE scratch (id int PRIMARY KEY, v text);
            CREATE TABLE loose (v text, n int);
            CREATE TABLE pairkey (a int, b text, v text, PRIMARY KEY (b, a));
            CREATE TABLE "Wéird ""tab.le"" Ñ" ("Key ""q"".x" int PRIMARY KEY, "Välue Ω" text);
            CREATE TABLE bare ();
            CREATE TABLE parent (id int PRIMARY KEY, v text);
            CREATE TABLE child (id int PRIMARY KEY, parent_id int REFERENCES parent ON DELETE CASCADE ON UPDATE CASCADE, v text);
            CREATE TABLE secured (id int PRIMARY KEY, tag text, v text);
            ALTER TABLE secured ENABLE ROW LEVEL SECURITY;
            ALTER TABLE secured FORCE ROW LEVEL SECURITY;
            CREATE POLICY only_app ON secured USING (tag = 'app') WITH CHECK (tag = 'app');
            CREATE TABLE stamped (id int PRIMARY KEY, v text, loud text);
            CREATE FUNCTION stamp() RETURNS trigger LANGUAGE plpgsql SET search_path FROM CURRENT AS $$
                BEGIN NEW.loud := upper(NEW.v) || '!'; RETURN NEW; END $$;
            CREATE TRIGGER a_stamp BEFORE INSERT OR UPDATE ON stamped FOR EACH ROW EXECUTE FUNCTION stamp();
            CREATE FUNCTION add_note(n int) RETURNS void LANGUAGE sql SECURITY DEFINER SET search_path FROM CURRENT AS $$
                INSERT INTO scratch VALUES (n, 'by a definer') $$;
            """#
        if major >= 18 {
            sql += #"""

                CREATE TABLE computed_virtual (id int PRIMARY KEY, a int,
                    thrice int GENERATED ALWAYS AS (a * 3) VIRTUAL, said text GENERATED ALWAYS AS ('v' || a) VIRTUAL);
                """#
        }
        return sql
    }

    /// A full row of `types`: every family, written as an application would.
    private static let fullRow = #"""
        INSERT INTO types VALUES (1,
            '{1,NULL,3}', '{"a b","c\"d",NULL}', '{{1,2},{3,4}}', 5, '{1,2}', ROW(1, 'dom'), 'ünï "code"', ROW(2, 'x,y'), '{sad,happy}',
            '[1,10)', '{[1,3),[5,8)}', '[2020-01-01 00:00+00,2021-01-01 00:00+00)',
            '{"b": [1, 2.50, null], "a": "é"}', '{"k": {"n": 1e3}}', '\x00ff10', 123456789.000000001, 1.5, '$1,234.56', '1 year 2 mons 3 days 04:05:06.789',
            '2026-11-25 13:14:15.123456+05:45', '2026-11-25 13:14:15', '23:59:59.999999', '12:00+03', '2000-02-29',
            'the quick:1 brown fox', 'fat & (rat | cat)', '<a b="1">x &amp; y</a>',
            '(1.5,2)', '{1,-1,0}', '[(0,0),(1,1)]', '(2,2),(0,0)', '[(0,0),(1,1),(2,0)]', '((0,0),(1,1),(1,0))', '<(0,0),1.5>',
            B'1010', B'10101', 'a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11', '192.168.0.1/24', '10.0.0.0/8', '08:00:2b:01:02:03', '08:00:2b:01:02:03:04:05',
            3.25, 1e-300, true, 'ab', 'abcde', E'tab\there, "quotes", \\ back, ☃, \u00e9', -32768, 4294967295,
            'a=>1, "b c"=>NULL', 'MiXeD', '(1, 2), (3, 4)')
        """#

    /// Every case, in the order they run.
    static func cases(major: Int) -> [Case] {
        var cases: [Case] = [
            Case(name: "every type family", sql: fullRow),
            Case(name: "numeric, float, money, interval and time extremes", sql: #"""
                INSERT INTO types (id, n, n2, f4, f8, m, iv, tz, ts, dt, j, tx, b) VALUES
                    (2, 'NaN', -99999999999999.999999, 'NaN', 'Infinity', '-92233720368547758.08', '-178000000 years', 'infinity', '-infinity', 'infinity',
                     '{"nul": "\u0000", "dup": 1}', '', ''),
                    (3, 'Infinity', 0.000001, '-Infinity', '-Infinity', '92233720368547758.07', '178000000 years 1 sec', '-infinity', 'infinity', '-infinity',
                     'null', NULL, NULL),
                    (4, '-Infinity', 1, 1.17549e-38, 4.9e-324, 0, '0', '1970-01-01 00:00+00', '4713-01-01 00:00 BC', '5874897-12-31',
                     '[]', repeat('long ', 200), '\x')
                """#),
            Case(name: "an update of composite, enum and jsonb columns", sql: """
                UPDATE types SET e = 'happy', c = ROW(3, 'three'), jb = jb || '{"k2": true}', ints = ints || 4 WHERE id = 1
                """),
            Case(name: "a delete of a row of extremes", sql: "DELETE FROM types WHERE id = 2"),
            Case(name: "identity, stored generated columns and defaults", sql: "INSERT INTO computed (a) VALUES (1), (2) RETURNING *"),
            Case(name: "a row of defaults only", sql: "INSERT INTO computed DEFAULT VALUES RETURNING id, twice, label"),
            Case(name: "an update that recomputes a generated column", sql: "UPDATE computed SET a = a + 10 RETURNING *"),
            Case(name: "a table with dropped columns", sql: "INSERT INTO dropped VALUES (1, 'one'); UPDATE dropped SET v = 'uno'"),
            Case(name: "many rows by INSERT … SELECT", sql: "INSERT INTO scratch SELECT g, 'row ' || g FROM generate_series(1, 200) AS g"),
            Case(name: "a few rows", sql: "UPDATE scratch SET v = v || '!' WHERE id <= 10 RETURNING id, v"),
            Case(name: "many rows by UPDATE", sql: "UPDATE scratch SET v = upper(v) WHERE id > 100"),
            Case(name: "many rows by DELETE", sql: "DELETE FROM scratch WHERE id % 3 = 0"),
            Case(name: "multi-row VALUES with ON CONFLICT DO UPDATE", sql: """
                INSERT INTO pairkey VALUES (1, 'a', 'x'), (2, 'b', 'y') ON CONFLICT (b, a) DO UPDATE SET v = excluded.v || '+' RETURNING *
                """),
            Case(name: "ON CONFLICT DO UPDATE of existing rows", sql: """
                INSERT INTO pairkey VALUES (1, 'a', 'x'), (2, 'b', 'y') ON CONFLICT (b, a) DO UPDATE SET v = excluded.v || '+' RETURNING *
                """),
            Case(name: "ON CONFLICT DO NOTHING", sql: "INSERT INTO pairkey VALUES (1, 'a', 'z'), (3, 'c', 'w') ON CONFLICT DO NOTHING RETURNING *"),
            Case(name: "a composite key that changes", sql: "UPDATE pairkey SET a = a + 100, b = b || 'b' WHERE b = 'a'"),
            Case(name: "UPDATE … FROM", sql: "UPDATE scratch AS s SET v = p.v FROM pairkey AS p WHERE s.id = p.a"),
            Case(name: "DELETE … USING", sql: "DELETE FROM scratch AS s USING pairkey AS p WHERE s.id = p.a + 1"),
            Case(name: "COPY FROM STDIN", sql: "COPY loose (v, n) FROM STDIN",
                 runner: .psql(input: "one\t1\ntwo, \"quoted\"\t2\n\\N\t\\N\nünï\t4\n")),
            Case(name: "TRUNCATE", sql: "TRUNCATE loose"),
            Case(name: "cascading deletes and updates", sql: """
                INSERT INTO parent VALUES (1, 'p1'), (2, 'p2');
                INSERT INTO child VALUES (10, 1, 'c1'), (11, 1, 'c2'), (12, 2, 'c3');
                DELETE FROM parent WHERE id = 1;
                UPDATE parent SET id = 20 WHERE id = 2
                """),
            Case(name: "a rolled-back savepoint publishes nothing of its own", sql: """
                BEGIN; INSERT INTO scratch VALUES (1001, 'kept'); SAVEPOINT s; INSERT INTO scratch VALUES (1002, 'gone');
                UPDATE scratch SET v = 'gone too' WHERE id = 1001; ROLLBACK TO s; COMMIT
                """),
            Case(name: "a rolled-back transaction publishes nothing", sql: "BEGIN; DELETE FROM scratch; ROLLBACK"),
            Case(name: "partitions, and a row that moves between them", sql: """
                INSERT INTO part VALUES (1, 'eu', 'a'), (2, 'us', 'b'), (3, 'elsewhere', 'c');
                UPDATE part SET region = 'us' WHERE id = 1;
                UPDATE part SET region = 'eu' WHERE id = 3;
                DELETE FROM part WHERE id = 2
                """),
            Case(name: "a partition attached and one detached", sql: """
                CREATE TABLE part_asia (LIKE part);
                ALTER TABLE part ATTACH PARTITION part_asia FOR VALUES IN ('asia');
                ALTER TABLE part DETACH PARTITION part_us
                """, runner: .owner),
            Case(name: "writes to an attached and a detached partition", sql: """
                INSERT INTO part VALUES (5, 'asia', 'new');
                INSERT INTO part_us VALUES (6, 'us', 'alone');
                UPDATE part_us SET v = 'still alone'
                """),
            Case(name: "inheritance", sql: """
                INSERT INTO animal VALUES (1, 'cat'); INSERT INTO dog VALUES (2, 'rex', 'woof');
                UPDATE animal SET name = name || '!'; DELETE FROM animal WHERE id = 2
                """),
            Case(name: "quoted, dotted, spaced and non-ASCII names", sql: #"""
                INSERT INTO "Wéird ""tab.le"" Ñ" VALUES (1, 'ü'), (2, NULL); UPDATE "Wéird ""tab.le"" Ñ" SET "Key ""q"".x" = 3 WHERE "Key ""q"".x" = 1
                """#),
            Case(name: "a table with no columns", sql: "INSERT INTO bare DEFAULT VALUES; INSERT INTO bare DEFAULT VALUES; DELETE FROM bare"),
            Case(name: "row-level security with FORCE", sql: """
                INSERT INTO secured VALUES (1, 'app', 'mine'), (2, 'app', 'also'); UPDATE secured SET v = 'changed' WHERE id = 1; DELETE FROM secured WHERE id = 2
                """),
            Case(name: "a write that row-level security refuses", sql: "INSERT INTO secured VALUES (3, 'other', 'refused')"),
            Case(name: "a BEFORE trigger that changes NEW", sql: "INSERT INTO stamped VALUES (1, 'abc'), (2, 'def'); UPDATE stamped SET v = 'xyz' WHERE id = 1"),
            Case(name: "a SECURITY DEFINER function", sql: "SELECT add_note(5000)"),
            Case(name: "a temporary table is not watched", sql: "CREATE TEMP TABLE session_only (id int); INSERT INTO session_only VALUES (1)"),
            Case(name: "a statement that fails publishes nothing", sql: "INSERT INTO scratch VALUES (7000, 'x'), (7000, 'duplicate')"),
            Case(name: "columns added, renamed and retyped after install", sql: #"""
                ALTER TABLE scratch ADD COLUMN extra int DEFAULT 5;
                ALTER TABLE scratch RENAME COLUMN v TO body;
                ALTER TABLE pairkey ALTER COLUMN v TYPE varchar(50);
                ALTER TABLE "Wéird ""tab.le"" Ñ" RENAME COLUMN "Key ""q"".x" TO "renamed key";
                ALTER TABLE dropped DROP COLUMN v
                """#, runner: .owner),
            Case(name: "writes after columns changed", sql: #"""
                INSERT INTO scratch (id, body) VALUES (6000, 'after'); UPDATE pairkey SET v = 'retyped';
                UPDATE "Wéird ""tab.le"" Ñ" SET "Välue Ω" = 'renamed'; INSERT INTO dropped VALUES (2); DELETE FROM dropped
                """#),
        ]
        if major >= 15 {
            cases.append(Case(name: "MERGE", sql: """
                MERGE INTO pairkey AS t USING (VALUES (2, 'b', 'merged'), (9, 'z', 'new')) AS s(a, b, v) ON t.a = s.a AND t.b = s.b
                 WHEN MATCHED THEN UPDATE SET v = s.v WHEN NOT MATCHED THEN INSERT VALUES (s.a, s.b, s.v)
                """))
            cases.append(Case(name: "MERGE that deletes", sql: """
                MERGE INTO scratch AS t USING generate_series(1, 120) AS s(id) ON t.id = s.id WHEN MATCHED AND t.id % 2 = 0 THEN DELETE
                """))
        }
        if major >= 17 {
            cases.append(Case(name: "MERGE … RETURNING", sql: """
                MERGE INTO pairkey AS t USING (VALUES (9, 'z', 'again'), (10, 'y', 'newer')) AS s(a, b, v) ON t.a = s.a AND t.b = s.b
                 WHEN MATCHED THEN UPDATE SET v = s.v WHEN NOT MATCHED THEN INSERT VALUES (s.a, s.b, s.v)
                 RETURNING merge_action(), t.*
                """))
        }
        if major >= 18 {
            cases += [
                Case(name: "RETURNING old and new", sql: "UPDATE scratch SET body = 'r' WHERE id IN (1, 5) RETURNING old.body, new.body, old.id"),
                Case(name: "virtual generated columns, one row", sql: "INSERT INTO computed_virtual VALUES (1, 1) RETURNING *"),
                Case(name: "virtual generated columns, a few rows", sql: "INSERT INTO computed_virtual VALUES (2, 2), (3, 3); UPDATE computed_virtual SET a = a * 10 WHERE id = 1"),
                Case(name: "virtual generated columns, many rows", sql: "INSERT INTO computed_virtual SELECT g, g FROM generate_series(10, 100) AS g; DELETE FROM computed_virtual WHERE id > 50"),
            ]
        }
        return cases
    }

    /// Functions that would hijack pgherald's, were its functions to follow
    /// the writer's `search_path`: the application role puts this schema first.
    static let hijacker = """
        CREATE SCHEMA hijack;
        CREATE FUNCTION hijack.nextval(regclass) RETURNS bigint LANGUAGE sql AS $$ SELECT -1::bigint $$;
        CREATE FUNCTION hijack.row_to_json(record) RETURNS json LANGUAGE plpgsql AS $$ BEGIN RETURN '"hijacked"'; END $$;
        CREATE FUNCTION hijack.to_json(anyelement) RETURNS json LANGUAGE sql AS $$ SELECT '"hijacked"'::json $$;
        CREATE FUNCTION hijack.pg_notify(text, text) RETURNS void LANGUAGE sql AS $$ SELECT $$;
        CREATE FUNCTION hijack.concat(text, text) RETURNS text LANGUAGE sql AS $$ SELECT 'hijacked' $$;
        """
}

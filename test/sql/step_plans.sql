-- A step's statement that repeats is prepared once and kept by the executor
-- that runs it (src/steps/step_plans.c).  A chain runs its steps in one
-- executor's batch, so the same text three times is kept there, and the
-- statements after it meet the kept plan: whatever changed in between
-- (the table, a function it inlines, a policy, a privilege) must show.
SET ROLE df_user;
CREATE TABLE plan_t (a int);
INSERT INTO plan_t VALUES (1), (2), (3);

-- a column added under the kept plan of SELECT *
SELECT df.start('SELECT * FROM plan_t ORDER BY a LIMIT 1'
                ~> 'SELECT * FROM plan_t ORDER BY a LIMIT 1'
                ~> 'SELECT * FROM plan_t ORDER BY a LIMIT 1'
                ~> 'ALTER TABLE plan_t ADD COLUMN b int DEFAULT 7'
                ~> 'SELECT * FROM plan_t ORDER BY a LIMIT 1') AS id \gset
SELECT df.await_instance(:'id', 60), df.result(:'id');

-- a SQL function the plan inlined, replaced
CREATE FUNCTION plan_f() RETURNS int LANGUAGE sql AS 'SELECT 1';
SELECT df.start('SELECT plan_f() AS v' ~> 'SELECT plan_f() AS v' ~> 'SELECT plan_f() AS v'
                ~> 'CREATE OR REPLACE FUNCTION plan_f() RETURNS int LANGUAGE sql AS ''SELECT 2'''
                ~> 'SELECT plan_f() AS v') AS id \gset
SELECT df.await_instance(:'id', 60), df.result(:'id');

-- row-level security turned on for the owner
SELECT df.start('SELECT count(*) AS n FROM plan_t' ~> 'SELECT count(*) AS n FROM plan_t'
                ~> 'SELECT count(*) AS n FROM plan_t'
                ~> 'CREATE POLICY plan_p ON plan_t USING (a > 1)'
                ~> 'ALTER TABLE plan_t ENABLE ROW LEVEL SECURITY'
                ~> 'ALTER TABLE plan_t FORCE ROW LEVEL SECURITY'
                ~> 'SELECT count(*) AS n FROM plan_t') AS id \gset
SELECT df.await_instance(:'id', 60), df.result(:'id');

-- a privilege revoked: the kept plan is checked again as it runs
SELECT df.start('SELECT max(a) AS m FROM plan_t' ~> 'SELECT max(a) AS m FROM plan_t'
                ~> 'SELECT max(a) AS m FROM plan_t'
                ~> 'REVOKE SELECT ON plan_t FROM df_user'
                ~> 'SELECT max(a) AS m FROM plan_t') AS id \gset
SELECT df.await_instance(:'id', 60);
SELECT status, result #>> '{}' AS outcome FROM df.nodes
WHERE instance_id = :'id' AND node_type = 'SQL' AND status = 'failed';
GRANT SELECT ON plan_t TO df_user;

-- a text is one statement: a semicolon at its end or in a literal is not a
-- second one
SELECT df.start('SELECT 1 AS one;' ~> 'SELECT 1 AS one;  ' ~> 'SELECT '';'' AS semicolon') AS id \gset
SELECT df.await_instance(:'id', 60), df.result(:'id');
SELECT df.start('SELECT 1 AS one; SELECT 2 AS two;') AS id \gset
SELECT df.await_instance(:'id', 60);
SELECT result #>> '{}' AS outcome FROM df.nodes WHERE instance_id = :'id';
DROP TABLE plan_t;
DROP FUNCTION plan_f();
RESET ROLE;

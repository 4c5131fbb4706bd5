-- The engine: the errors of df.start not covered by engine_basic, and the
-- node texts of steps that fail (transaction control, syntax, privileges,
-- several statements, empty statements).
CREATE TABLE errors_secret (v text);
INSERT INTO errors_secret VALUES ('hidden');
SET ROLE df_user;
CREATE TABLE errors_log (v text);
SELECT count(*) AS instances_before FROM df.instances \gset

-- df.start: malformed or invalid graphs
SELECT df.start('{"node_type":"SQL"}');
SELECT df.start('{"node_type":"SQL","query":5}');
SELECT df.start('{"node_type":"SLEEP","query":"soon"}');
SELECT df.start('{"node_type":"THEN","left_node":{"node_type":"SQL","query":"SELECT 1"},"right_node":{"node_type":"NOPE"}}');
SELECT df.start('{"node_type":"THEN","left_node":{"node_type":"SQL"},"right_node":{"node_type":"SQL","query":"SELECT 1"}}');
SELECT df.start('{"node_type":"IF","left_node":{"node_type":"SQL","query":"SELECT 1"},"right_node":{"node_type":"SQL","query":"SELECT 2"}}');
SELECT df.start('{"node_type":"IF","left_node":{"node_type":"SQL","query":"SELECT 1"},"right_node":{"node_type":"SQL","query":"SELECT 2"},"condition_node":"SELECT true"}');
SELECT df.start('{"node_type":"IF","left_node":{"node_type":"SQL","query":"SELECT 1"},"right_node":{"node_type":"SQL","query":"SELECT 2"},"query":"{\"condition_node\":{\"node_type\":\"SQL\",\"query\":\"SELECT true\"}}"}');
SELECT df.start('{"node_type":"IF","left_node":{"node_type":"SQL","query":"SELECT 1"},"right_node":{"node_type":"SQL","query":"SELECT 2"},"query":"not json"}');
SELECT df.start('{"node_type":"JOIN","left_node":{"node_type":"SQL","query":"SELECT 1"},"right_node":{"node_type":"SQL","query":"SELECT 2"},"extra_nodes":["SELECT 3"]}');
SELECT df.start('{"node_type":"JOIN","left_node":{"node_type":"SQL","query":"SELECT 1"},"right_node":{"node_type":"SQL","query":"SELECT 2"},"extra_nodes":[{"node_type":"SQL","query":"SELECT 3"},{"node_type":"NOPE"}]}');
SELECT df.start('{"node_type":"SQL","query":"SELECT 1","result_name":"1bad"}');
-- limits: depth and node count
SELECT df.start((SELECT string_agg('{"node_type":"THEN","left_node":{"node_type":"SQL","query":"SELECT 1"},"right_node":', '') FROM generate_series(1, 300))
                || '{"node_type":"SQL","query":"SELECT 1"}' || repeat('}', 300));
SELECT df.start('{"node_type":"JOIN","left_node":{"node_type":"SQL","query":"SELECT 1"},"right_node":{"node_type":"SQL","query":"SELECT 2"},"extra_nodes":['
                || (SELECT string_agg('{"node_type":"SQL","query":"SELECT 3"}', ',') FROM generate_series(1, 10000)) || ']}');
-- an unknown database (other databases and 'new' mode: tenancy_new.sql, t/010, t/011)
SELECT df.start('SELECT 1', NULL, 'no_such_database');
SELECT count(*) - :instances_before AS no_rows_left_behind FROM df.instances;
-- a label over 1,024 bytes (6.4 KB would break the label index inside
-- the engine's INSERT) fails before anything is written, in either
-- transaction mode; 1,024 bytes are accepted
SELECT df.start('SELECT 1', (SELECT string_agg(md5(i::text), '') FROM generate_series(1, 200) i));
SELECT df.start('SELECT 1', repeat('é', 513), transaction_mode => 'new');
SELECT count(*) - :instances_before AS no_rows_left_behind FROM df.instances;
SELECT df.start('SELECT 1', repeat('x', 1024)) AS id \gset
SELECT octet_length(label) AS label_bytes FROM df.instances WHERE id = :'id';
SELECT df.await_instance(:'id');

-- steps: every failure is the node's result and the instance's end
CREATE PROCEDURE show_step(q text) LANGUAGE plpgsql AS $$
DECLARE
	iid text;
	st text;
	res text;
BEGIN
	iid := df.start(q);
	COMMIT;
	st := df.await_instance(iid);
	SELECT coalesce(n.result::text, '-') INTO res FROM df.nodes n WHERE n.instance_id = iid;
	RAISE NOTICE '%: % %', rpad(replace(q, E'\n', '\n'), 44), st, res;
END
$$;
CALL show_step('COMMIT');
CALL show_step('ROLLBACK');
CALL show_step('BEGIN');
CALL show_step('SAVEPOINT s');
CALL show_step('RELEASE SAVEPOINT s');
CALL show_step('START TRANSACTION');
CALL show_step('PREPARE TRANSACTION ''x''');
CALL show_step('INSERT INTO errors_log VALUES (''before commit''); COMMIT');
CALL show_step('SELEC 1');
CALL show_step('SELECT * FROM no_such_table');
CALL show_step('SELECT v FROM errors_secret');
CALL show_step('INSERT INTO errors_secret VALUES (''x'')');
CALL show_step('SELECT 1; SELECT 2');
CALL show_step('INSERT INTO errors_log VALUES (''first''); INSERT INTO errors_log VALUES (''second'')');
CALL show_step('SELECT 1;');
CALL show_step(';');
CALL show_step('   ');
CALL show_step('-- only a comment');
CALL show_step('COPY errors_log TO STDOUT');
CALL show_step('VACUUM errors_log');
CALL show_step('DO $x$ BEGIN RAISE EXCEPTION ''custom failure'' USING DETAIL = ''some detail''; END $x$');
SELECT v FROM errors_log ORDER BY v;
-- a failing step among several: the node and every ancestor fail with its text
SELECT df.start('SELECT 1' ~> ('SELEC 2' ~> 'SELECT 3')) AS id \gset
SELECT df.await_instance(:'id');
SELECT node_type, status, result FROM df.nodes WHERE instance_id = :'id' ORDER BY 1, 2, result::text;
RESET ROLE;
SELECT engine_idle();
SELECT count(*) AS engine_rows_left FROM df_internal.runs;
DROP TABLE errors_secret;

-- The row checks of df.nodes and df_internal.events (src/store/row_checks.c):
-- every node type and event kind the engine writes passes, anything else
-- is refused under the constraint's name, and a node's children and query
-- must fit its type.  Ids are 8 lowercase hexadecimal digits.
SELECT i, df_internal.id_ok(i)
FROM unnest(ARRAY['0123abcd', '89efabcd', '0123ABCD', '0123abc', '0123abcde', '0123abcg',
				  '', ' 123abcd', '0123abc/', '0123abc:']) i;
SELECT df_internal.id_ok(NULL) IS NULL AS strict;
SELECT df_internal.node_type_ok(t) AS ok, count(*)
FROM unnest(ARRAY['SQL', 'THEN', 'IF', 'JOIN', 'LOOP', 'BREAK', 'RACE', 'SLEEP',
				  'WAIT_SCHEDULE', 'HTTP', 'HTTP_MULTIPART', 'SIGNAL', 'RETRY', 'TIMEOUT',
				  'CATCH', 'FAIL', 'COMPENSATED', 'SAGA', 'BREAKER', 'MAP', 'LIMIT',
				  'PUBLISH', 'EVENT', 'LOCK']) t
GROUP BY 1;
SELECT t, df_internal.node_type_ok(t) FROM unnest(ARRAY['sql', 'NOPE', '', 'SQL ']) t;
SELECT df_internal.node_type_ok(NULL) IS NULL AS strict;

-- left, right, query: which combinations each type accepts
SELECT t AS node_type,
	   string_agg(CASE WHEN df_internal.node_shape_ok(t, l, r, q)
				  THEN (CASE WHEN l THEN 'L' ELSE '-' END) || (CASE WHEN r THEN 'R' ELSE '-' END)
					   || (CASE WHEN q THEN 'Q' ELSE '-' END) END, ' '
				  ORDER BY l DESC, r DESC, q DESC) AS shapes
FROM unnest(ARRAY['SQL', 'FAIL', 'RETRY', 'LOCK', 'CATCH', 'IF', 'COMPENSATED', 'THEN', 'RACE',
				  'SAGA', 'LOOP', 'JOIN', 'MAP', 'NOPE']) WITH ORDINALITY AS u(t, o),
	 unnest(ARRAY[true, false]) l, unnest(ARRAY[true, false]) r, unnest(ARRAY[true, false]) q
GROUP BY t, o ORDER BY o;

SELECT k, df_internal.event_kind_ok(k)
FROM unnest(ARRAY['instance_started', 'node_completed', 'lock_timeout', 'event_received',
				  'node_finished', 'NODE_STARTED']) k;

\set VERBOSITY terse
-- the constraints refuse what the functions refuse, by name (the keys to
-- df.instances and between nodes are deferred: nothing else is checked here)
BEGIN;
INSERT INTO df.nodes (instance_id, id, node_type, query, submitted_by)
VALUES ('0000000a', '0000000b', 'NOPE', 'SELECT 1', 'postgres');
ROLLBACK;
BEGIN;
INSERT INTO df.nodes (instance_id, id, node_type, query, left_node, submitted_by)
VALUES ('0000000a', '0000000b', 'SQL', 'SELECT 1', '0000000c', 'postgres');
ROLLBACK;
BEGIN;
INSERT INTO df.nodes (instance_id, id, node_type, query, submitted_by)
VALUES ('0000000a', '0000000b', 'SQL', 'SELECT 1', 'postgres');
SELECT node_type, status FROM df.nodes WHERE instance_id = '0000000a';
ROLLBACK;
BEGIN;
INSERT INTO df_internal.events (instance_id, kind) VALUES ('0000000a', 'node_finished');
ROLLBACK;
BEGIN;
INSERT INTO df.nodes (instance_id, id, node_type, query, submitted_by)
VALUES ('0000000a', '0000000B', 'SQL', 'SELECT 1', 'postgres');
ROLLBACK;
BEGIN;
INSERT INTO df.nodes (instance_id, id, node_type, query, submitted_by)
VALUES ('000000a', '0000000b', 'SQL', 'SELECT 1', 'postgres');
ROLLBACK;
BEGIN;
INSERT INTO df.instances (id, root_node, submitted_by) VALUES ('0000000g', '0000000b', 'postgres');
ROLLBACK;
BEGIN;
INSERT INTO df.instances (id, root_node, submitted_by) VALUES ('0000000a', '0000000B', 'postgres');
ROLLBACK;

-- df.start writes its instance, node and runs rows without statements
-- (src/store/start_rows.c, src/store/row_prep.c): the tables' CHECK
-- constraints still apply to them, with an INSERT's error, including one
-- added after this backend prepared the checks, and gone again once dropped;
-- a column default changed meanwhile is used; a user's INSERT trigger on
-- df.instances or df_internal.runs fires (the statement writes the row then).
BEGIN;
SET LOCAL ROLE df_user;
SELECT df.start('SELECT 1', 'rc_prepared') IS NOT NULL AS started;
RESET ROLE;
SELECT label, status, root_node IS NOT NULL AS has_root FROM df.instances WHERE label = 'rc_prepared';
ROLLBACK;
ALTER TABLE df.instances ADD CONSTRAINT instances_label_test_check CHECK (label <> 'rc_refused') NOT VALID;
ALTER TABLE df.nodes ADD CONSTRAINT nodes_query_test_check CHECK (query <> 'SELECT 13') NOT VALID;
BEGIN;
SET LOCAL ROLE df_user;
SELECT df.start('SELECT 1', 'rc_refused');
ROLLBACK;
BEGIN;
SET LOCAL ROLE df_user;
SELECT df.start('SELECT 13', 'rc_fine');
ROLLBACK;
BEGIN;
SET LOCAL ROLE df_user;
SELECT df.start('SELECT 1', 'rc_fine') IS NOT NULL AS other_rows_pass;
ROLLBACK;
ALTER TABLE df.instances DROP CONSTRAINT instances_label_test_check;
-- a CHECK with a long IN list, prepared once and used by starts in
-- several transactions, still refuses what it lists
ALTER TABLE df.instances ADD CONSTRAINT instances_label_list_check
	CHECK (label NOT IN ('rc_l1', 'rc_l2', 'rc_l3', 'rc_l4', 'rc_l5', 'rc_l6', 'rc_l7', 'rc_l8',
						 'rc_l9', 'rc_l10')) NOT VALID;
BEGIN;
SET LOCAL ROLE df_user;
SELECT df.start('SELECT 1', 'rc_list_a') IS NOT NULL AS started;
ROLLBACK;
BEGIN;
SET LOCAL ROLE df_user;
SELECT df.start('SELECT 1', 'rc_list_b') IS NOT NULL AS started;
ROLLBACK;
BEGIN;
SET LOCAL ROLE df_user;
SELECT df.start('SELECT 1', 'rc_l7');
ROLLBACK;
BEGIN;
SET LOCAL ROLE df_user;
SELECT df.start('SELECT 1', 'rc_list_c') IS NOT NULL AS started;
ROLLBACK;
ALTER TABLE df.instances DROP CONSTRAINT instances_label_list_check;
ALTER TABLE df.nodes DROP CONSTRAINT nodes_query_test_check;
ALTER TABLE df.nodes ALTER COLUMN error SET DEFAULT 'nodes_default';
BEGIN;
SET LOCAL ROLE df_user;
SELECT df.start('SELECT 13', 'rc_refused') IS NOT NULL AS started_again;
RESET ROLE;
SELECT n.query, n.error FROM df.nodes n JOIN df.instances i ON i.id = n.instance_id
WHERE i.label = 'rc_refused';
ROLLBACK;
ALTER TABLE df.nodes ALTER COLUMN error DROP DEFAULT;
CREATE FUNCTION row_checks_notice() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
	RAISE NOTICE '% trigger on %: label %', TG_WHEN, TG_TABLE_NAME, NEW.label;
	RETURN NEW;
END $$;
CREATE TRIGGER row_checks_instances BEFORE INSERT ON df.instances
	FOR EACH ROW EXECUTE FUNCTION row_checks_notice();
CREATE TRIGGER row_checks_runs BEFORE INSERT ON df_internal.runs
	FOR EACH ROW EXECUTE FUNCTION row_checks_notice();
BEGIN;
SET LOCAL ROLE df_user;
SELECT df.start('SELECT 1', 'rc_triggered') IS NOT NULL AS started;
RESET ROLE;
SELECT count(*) AS runs_rows FROM df_internal.runs r JOIN df.instances i ON i.id = r.instance_id
WHERE i.label = 'rc_triggered';
ROLLBACK;
DROP TRIGGER row_checks_instances ON df.instances;
DROP TRIGGER row_checks_runs ON df_internal.runs;
DROP FUNCTION row_checks_notice();
-- the captured variables, with the start's idempotency key and trace
SET ROLE df_user;
SELECT df.setvar('row_checks_a', 'one');
RESET ROLE;
INSERT INTO df.vars (name, value, owner) VALUES ('row_checks_b', NULL, 'df_user');
BEGIN;
SET LOCAL ROLE df_user;
SELECT df.start('SELECT 1', 'rc_vars', idempotency_key => 'row-checks-key') IS NOT NULL AS started;
RESET ROLE;
-- (the trace context is df.instances's, not a variable of the row;
-- the start snapshot is there for an EVENT node only)
SELECT r.vars, r.start_snapshot IS NULL AS no_snapshot, i.trace_id ~ '^[0-9a-f]{32}$' AS traced
FROM df_internal.runs r JOIN df.instances i ON i.id = r.instance_id WHERE i.label = 'rc_vars';
SET LOCAL ROLE df_user;
SELECT df.start('SELECT 1', 'rc_vars2') IS NOT NULL AS started;
SELECT df.start(df.wait_for_event('rc.topic') ~> 'SELECT 1', 'rc_event') IS NOT NULL AS started;
RESET ROLE;
SELECT r.vars FROM df_internal.runs r
JOIN df.instances i ON i.id = r.instance_id WHERE i.label = 'rc_vars2';
SELECT i.label, r.start_snapshot IS NOT NULL AS has_snapshot,
	   pg_catalog.pg_visible_in_snapshot(pg_catalog.pg_current_xact_id(), r.start_snapshot) AS own_xact_visible
FROM df_internal.runs r JOIN df.instances i ON i.id = r.instance_id
WHERE i.label IN ('rc_vars2', 'rc_event') ORDER BY 1;
ROLLBACK;
SET ROLE df_user;
SELECT df.clearvars();
RESET ROLE;

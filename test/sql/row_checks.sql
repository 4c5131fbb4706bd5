-- The row checks of df.nodes and df_internal.events (src/api/row_checks.c):
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

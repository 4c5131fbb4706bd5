-- instances_root_node_same_instance_fkey: an instance's root node is one of
-- its nodes, checked at commit from both tables (deferred constraint
-- triggers, not a foreign key, so that pg_restore can load df.instances and
-- then df.nodes in transactions of their own).
\set VERBOSITY terse
CREATE FUNCTION pg_temp.node(inst text, id text) RETURNS void LANGUAGE sql AS $$
	INSERT INTO df.nodes (id, instance_id, node_type, query, submitted_by)
	VALUES (id, inst, 'SQL', 'SELECT 1', current_user::regrole) $$;

-- the constraint triggers carry the key's name, deferrable and deferred
SELECT conrelid::regclass, conname, contype, condeferrable, condeferred
FROM pg_constraint WHERE conname = 'instances_root_node_same_instance_fkey' ORDER BY 1;

-- the three graph references under the reference's names, all deferrable
-- and deferred (the reference's test 51 counts exactly these three rows);
-- the node references are foreign keys, the root one is the triggers above
SELECT count(*) AS deferred_graph_references
FROM pg_constraint c JOIN pg_class t ON t.oid = c.conrelid
	JOIN pg_namespace ns ON ns.oid = t.relnamespace
WHERE ns.nspname = 'df'
	AND (t.relname, c.conname) IN (('nodes', 'nodes_left_node_same_instance_fkey'),
								   ('nodes', 'nodes_right_node_same_instance_fkey'),
								   ('instances', 'instances_root_node_same_instance_fkey'))
	AND c.condeferrable AND c.condeferred;
SELECT conname, contype, pg_get_constraintdef(oid) AS definition
FROM pg_constraint WHERE conrelid = 'df.nodes'::regclass AND contype = 'f' ORDER BY 1;

-- a node whose child is not a node of the same instance is refused at commit
BEGIN;
INSERT INTO df.instances (id, root_node, submitted_by) VALUES ('0000aa03', '0000bb06', current_user::regrole);
INSERT INTO df.nodes (id, instance_id, node_type, left_node, submitted_by)
VALUES ('0000bb06', '0000aa03', 'LOOP', '0000bb07', current_user::regrole);
COMMIT;
BEGIN;
INSERT INTO df.instances (id, root_node, submitted_by) VALUES ('0000aa03', '0000bb06', current_user::regrole);
INSERT INTO df.nodes (id, instance_id, node_type, left_node, right_node, submitted_by)
VALUES ('0000bb06', '0000aa03', 'THEN', '0000bb07', '0000bb08', current_user::regrole);
SELECT pg_temp.node('0000aa03', '0000bb07');
COMMIT;
SELECT count(*) AS instance_without_all_children FROM df.instances WHERE id = '0000aa03';

-- an instance whose root is not among its nodes is refused at commit
BEGIN;
INSERT INTO df.instances (id, root_node, submitted_by) VALUES ('0000aa01', '0000bb01', current_user::regrole);
SELECT pg_temp.node('0000aa01', '0000bb02');
COMMIT;

-- with its root node it is accepted, whatever the order of the inserts
BEGIN;
SELECT pg_temp.node('0000aa01', '0000bb01');
INSERT INTO df.instances (id, root_node, submitted_by) VALUES ('0000aa01', '0000bb01', current_user::regrole);
COMMIT;

-- an instance without nodes is accepted (a restore loads df.nodes later) ...
INSERT INTO df.instances (id, root_node, submitted_by) VALUES ('0000aa02', '0000bb03', current_user::regrole);
-- ... but the nodes that come must include its root
SELECT pg_temp.node('0000aa02', '0000bb04');
SELECT pg_temp.node('0000aa02', '0000bb03');
SELECT count(*) FROM df.nodes WHERE instance_id = '0000aa02';

-- the root node cannot be deleted or moved while its instance exists
DELETE FROM df.nodes WHERE instance_id = '0000aa01' AND id = '0000bb01';
UPDATE df.nodes SET id = '0000bb09' WHERE instance_id = '0000aa01' AND id = '0000bb01';
UPDATE df.instances SET root_node = '0000bb09' WHERE id = '0000aa01';
-- another node can
SELECT pg_temp.node('0000aa01', '0000bb05');
DELETE FROM df.nodes WHERE instance_id = '0000aa01' AND id = '0000bb05';

-- deleting the instance takes its nodes along
DELETE FROM df.instances WHERE id IN ('0000aa01', '0000aa02');
SELECT count(*) FROM df.nodes WHERE instance_id IN ('0000aa01', '0000aa02');

-- only df.start's own rows skip the two sides: the setting their WHEN
-- reads is off here (so the inserts above were checked one by one), and no
-- role but a superuser may turn it on
SELECT current_setting('pg_durable.start_inserts_nodes') AS start_inserts_nodes;
SELECT tgrelid::regclass, tgname, pg_get_triggerdef(oid) LIKE '%WHEN%pg_durable.start_inserts_nodes%' AS skips_start
FROM pg_trigger WHERE tgname = 'instances_root_node_same_instance_fkey' ORDER BY 1;
SET ROLE df_user;
SET pg_durable.start_inserts_nodes = on;
RESET ROLE;

-- df.start writes its node rows without an INSERT (no trigger of df.nodes
-- fires for them, foreign keys included) and its instance row with the
-- setting on: the rows are still what the checks want, and get the
-- columns' defaults and every index entry as an INSERT's would
BEGIN;
SET LOCAL ROLE df_user;
SELECT df.start((('SELECT 1'::text ~> 'SELECT 2'::text) & 'SELECT 3'::text) |
				'SELECT 4'::text) AS started \gset
SELECT count(*) AS nodes,
	   count(*) FILTER (WHERE status = 'pending' AND created_at = now()
						AND updated_at = now() AND result IS NULL) AS with_defaults,
	   count(*) FILTER (WHERE submitted_by = current_user::regrole) AS submitted_by_caller
FROM df.nodes WHERE instance_id = :'started';
SELECT count(*) AS dangling_references
FROM df.nodes n, LATERAL (VALUES (n.left_node), (n.right_node)) r (child)
WHERE n.instance_id = :'started' AND r.child IS NOT NULL
	AND NOT EXISTS (SELECT FROM df.nodes c WHERE c.instance_id = n.instance_id AND c.id = r.child);
SELECT count(*) AS root_found
FROM df.instances i JOIN df.nodes n ON n.instance_id = i.id AND n.id = i.root_node
WHERE i.id = :'started';
-- found through the primary key's index, as the engine looks them up
SET LOCAL enable_seqscan = off;
SET LOCAL enable_bitmapscan = off;
SELECT count(*) AS by_index FROM df.nodes n JOIN df.instances i ON i.id = n.instance_id
WHERE n.instance_id = :'started' AND n.id IN (SELECT id FROM df.nodes WHERE instance_id = :'started');
-- the deferred checks that remain find nothing wrong
SET CONSTRAINTS ALL IMMEDIATE;
SELECT current_setting('pg_durable.start_inserts_nodes') AS start_inserts_nodes_after;
ROLLBACK;

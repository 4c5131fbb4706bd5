-- The depth limit as df.start applies it: the root is at depth
-- 0, as in the reference, so a chain of 257 steps (256 THENs, depth 256)
-- is accepted and runs to the end, and one more step is refused with the
-- depth message, leaving no rows behind.
SET ROLE df_user;
CREATE TEMP TABLE chains AS
WITH RECURSIVE c(steps, g) AS (
	SELECT 1, df.sql('SELECT 1')
	UNION ALL
	SELECT steps + 1, g ~> ('SELECT ' || (steps + 1)) FROM c WHERE steps < 258
)
SELECT steps, g FROM c WHERE steps >= 257;

CREATE TEMP TABLE started AS
SELECT df.start(g, 'depth-256') AS id FROM chains WHERE steps = 257;
SELECT df.await_instance(id, 120) AS status FROM started;
SELECT df.result(id) AS result,
	(SELECT count(*) FROM df.nodes n WHERE n.instance_id = s.id) AS nodes
FROM started s;

SELECT count(*) AS instances_before FROM df.instances \gset
SELECT df.start(g, 'depth-257') FROM chains WHERE steps = 258;
SELECT count(*) - :instances_before AS new_instances,
	(SELECT count(*) FROM df.instances WHERE label = 'depth-257') AS labelled
FROM df.instances;
RESET ROLE;

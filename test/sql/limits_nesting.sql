-- A df.limit inside a df.limit of the same key (docs/guides/limits.md,
-- "One key once on a path"): refused at df.start when the keys are
-- literal, a failure of kind limit_nesting at run time when they are
-- templates, and df.check() reports an instance that waits for a slot or
-- a lock key an enclosing node of its own holds.
SET ROLE df_user;

-- literal keys: refused at df.start, whatever max_concurrent says
SELECT df.start(df.limit(df.limit('SELECT 1', 'nest-k', max_concurrent => 1), 'nest-k', max_concurrent => 1));
SELECT df.start(df.limit('SELECT 0' ~> df.limit('SELECT 1', 'nest-k', 5), 'nest-k', rate => 3));
-- different keys, or the same key in sequence, are fine
SELECT df.start(df.limit(df.limit('SELECT 1', 'nest-a', 1), 'nest-b', 1)) AS ok1 \gset
SELECT df.start(df.limit('SELECT 1', 'nest-a', 1) ~> df.limit('SELECT 2', 'nest-a', 1)) AS ok2 \gset
SELECT df.await_instance(:'ok1', 60), df.await_instance(:'ok2', 60);

-- templates: the node fails when it starts, naming the key and the outer node
SELECT df.start(('SELECT ''t1'' AS v' |=> 'r')
				~> df.limit(df.limit('SELECT 1', 'nest:$r.v', 1), 'nest:$r.v', 1)) AS t1 \gset
SELECT df.await_instance(:'t1', 60);
SELECT DISTINCT regexp_replace(result #>> '{}', 'node [0-9a-f]+', 'node N') AS failure
FROM df.nodes WHERE instance_id = :'t1' AND node_type = 'LIMIT' AND status = 'failed';
SELECT count(*) AS slots_left FROM df.limits WHERE key LIKE 'nest:%' AND held > 0;
-- an inner literal key the outer template resolves to
SELECT df.start(('SELECT ''t2'' AS v' |=> 'r')
				~> df.limit(df.limit('SELECT 1', 'nest:t2', 1), 'nest:$r.v', 1)) AS t2 \gset
SELECT df.await_instance(:'t2', 60);
SELECT DISTINCT regexp_replace(result #>> '{}', 'node [0-9a-f]+', 'node N') AS failure
FROM df.nodes WHERE instance_id = :'t2' AND node_type = 'LIMIT' AND status = 'failed';

RESET ROLE;
-- df.check: an instance whose inner LIMIT is queued on the key its outer
-- LIMIT holds (written by hand: the engine no longer lets one form)
SET ROLE df_user;
SELECT df.start(df.limit(df.wait_for_signal('go'), 'nest-self', 1)) AS s \gset
RESET ROLE;
SELECT wait_until(format('SELECT EXISTS (SELECT 1 FROM df.nodes WHERE instance_id = %L AND node_type = ''SIGNAL'' AND status = ''running'')', :'s'), 60);
INSERT INTO df_internal.limit_waiters (instance_id, node_id, scope, key, submitted_by)
SELECT n.instance_id, n.id, n.status_details ->> 'execution_id', h.key, h.submitted_by
FROM df.nodes n JOIN df_internal.limit_holders h ON h.instance_id = n.instance_id
WHERE n.instance_id = :'s' AND n.node_type = 'SIGNAL';
SELECT problem, regexp_replace(regexp_replace(detail, '(node|scope) [^ ]+', '\1 X', 'g'), '~[0-9]+/', '~R/') AS detail
FROM df.check() WHERE instance_id = :'s' AND problem = 'waits_for_itself';
DELETE FROM df_internal.limit_waiters WHERE instance_id = :'s';
SELECT count(*) FROM df.check() WHERE instance_id = :'s' AND problem = 'waits_for_itself';
SELECT df.cancel(:'s') IS NOT NULL AS cancelled;

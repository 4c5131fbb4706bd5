-- Limits (docs/design/locks-and-limits.md §4): the JSON of df.limit, its
-- validation at build time and at df.start, a LIMIT node run, the FIFO
-- queue with its hand-over and queue_timeout, the release of a slot by a
-- cancel and by an enclosing df.timeout, and the view df.limits.
SET ROLE df_user;

-- exact JSON: only the arguments given
SELECT df.limit('SELECT 1', 'k', 3);
SELECT df.limit('SELECT 1', 'api', rate => 20);
SELECT df.limit('SELECT 1', 'api:{tenant}', 2, 5.5, 3, '1.5 seconds');
SELECT df.limit('SELECT 1' ~> 'SELECT 2', 'k', max_concurrent => 1) AS subtree;

-- build-time errors
SELECT df.limit('SELECT 1', 'k');
SELECT df.limit('SELECT 1', 'k', 0);
SELECT df.limit('SELECT 1', 'k', -2);
SELECT df.limit('SELECT 1', 'k', rate => 0);
SELECT df.limit('SELECT 1', 'k', rate => -1);
SELECT df.limit('SELECT 1', 'k', rate => 'NaN');
SELECT df.limit('SELECT 1', 'k', rate => 2e6);
SELECT df.limit('SELECT 1', 'k', 3, burst => 2);
SELECT df.limit('SELECT 1', 'k', rate => 1, burst => 0);
SELECT df.limit('SELECT 1', 'k', rate => 1, burst => -1);
SELECT df.limit('SELECT 1', '  ', 1);
SELECT df.limit('SELECT 1', repeat('k', 1001), 1);
SELECT df.limit('SELECT 1', 'k', 1, queue_timeout => '0');
SELECT df.limit('SELECT 1', 'k', 1, queue_timeout => '-1 second');
SELECT df.limit(NULL, 'k', 1);
SELECT df.limit('SELECT 1', NULL, 1);

-- hand-written graphs at df.start
SELECT df.start('{"node_type":"LIMIT","left_node":{"node_type":"SQL","query":"SELECT 1"},"query":"{\"max_concurrent\":1}"}');
SELECT df.start('{"node_type":"LIMIT","left_node":{"node_type":"SQL","query":"SELECT 1"},"query":"{\"key\":\"k\"}"}');
SELECT df.start('{"node_type":"LIMIT","left_node":{"node_type":"SQL","query":"SELECT 1"},"query":"{\"key\":\"k\",\"max\":1}"}');
SELECT df.start('{"node_type":"LIMIT","left_node":{"node_type":"SQL","query":"SELECT 1"},"query":"{\"key\":\"k\",\"max_concurrent\":-1,\"rate\":1}"}');
SELECT df.start('{"node_type":"LIMIT","query":"{\"key\":\"k\",\"max_concurrent\":1}"}');

-- wait (with a deadline) until a condition holds
CREATE FUNCTION lim_until(cond text) RETURNS boolean LANGUAGE plpgsql AS $$
DECLARE
	deadline timestamptz := clock_timestamp() + interval '60 seconds';
	ok boolean;
BEGIN
	LOOP
		EXECUTE 'SELECT ' || cond INTO ok;
		IF ok THEN
			RETURN true;
		END IF;
		IF clock_timestamp() > deadline THEN
			RETURN false;
		END IF;
		PERFORM pg_sleep(0.01);
	END LOOP;
END $$;

-- a LIMIT node runs its step; the step's result is the node's
SELECT df.start(df.limit('SELECT 41 + 1 AS v', 'lim-plain', 2) |=> 'r' ~> 'SELECT $r.v AS again') AS id \gset
SELECT df.await_instance(:'id', 60);
SELECT df.result(:'id');
SELECT node_type, status FROM df.nodes WHERE instance_id = :'id' ORDER BY node_type, status;

-- a holder waiting for a signal keeps its slot: the next one queues, FIFO,
-- and the one with a queue_timeout fails with kind queue_timeout
SELECT df.start(df.limit(df.wait_for_signal('go'), 'lim-q', 1)) AS holder \gset
SELECT lim_until(format('EXISTS (SELECT 1 FROM df.limits WHERE key = %L AND held = 1)', 'lim-q')) AS holding;
SELECT df.start(df.limit('SELECT ''second'' AS who', 'lim-q', 1)) AS second \gset
SELECT lim_until(format('EXISTS (SELECT 1 FROM df.limits WHERE key = %L AND queued = 1)', 'lim-q')) AS second_queued;
SELECT df.start(df.limit('SELECT ''late'' AS who', 'lim-q', 1, queue_timeout => '0.2 seconds')) AS late \gset
SELECT df.await_instance(:'late', 60);
SELECT status_details->'error'->>'code' AS code, result
FROM df.nodes WHERE instance_id = :'late' AND node_type = 'LIMIT';
SELECT key, max_concurrent, rate, held, queued, next_admission FROM df.limits WHERE key = 'lim-q';
SELECT status_details ? 'queued_at' AS queued_shown, status_details->>'waiting_on' AS waiting_on
FROM df.nodes WHERE instance_id = :'second' AND node_type = 'LIMIT';
SELECT waiting_on FROM df.list_instances() WHERE instance_id = :'second';
SELECT key, position, instance_id = :'second' AS is_second, deadline FROM df.limit_queue
WHERE key = 'lim-q';
-- the holder's end hands its slot to the second in the same transaction
SELECT df.signal(:'holder', 'go', '{}');
SELECT df.await_instance(:'holder', 60), df.await_instance(:'second', 60);
SELECT df.result(:'second');
SELECT key, held, queued FROM df.limits WHERE key = 'lim-q';
-- its history says when it was queued and when admitted
SELECT kind, n.node_type, detail FROM df.history(:'second') h JOIN df.nodes n
	ON n.instance_id = :'second' AND n.id = h.node_id
WHERE kind IN ('limit_queued', 'limit_admitted') ORDER BY at;

-- a cancelled holder releases its slot: the queued one gets it
SELECT df.start(df.limit(df.wait_for_signal('go'), 'lim-c', 1)) AS holder \gset
SELECT lim_until(format('EXISTS (SELECT 1 FROM df.limits WHERE key = %L AND held = 1)', 'lim-c')) AS holding;
SELECT df.start(df.limit('SELECT ''after cancel'' AS who', 'lim-c', 1)) AS next \gset
SELECT lim_until(format('EXISTS (SELECT 1 FROM df.limits WHERE key = %L AND queued = 1)', 'lim-c')) AS queued;
-- (not in a transaction whose snapshot could hide a newer holder or waiter)
BEGIN ISOLATION LEVEL REPEATABLE READ;
SELECT df.cancel(:'holder', 'test');
ROLLBACK;
SELECT df.cancel(:'holder', 'test') LIKE '%cancelled: test' AS cancelled;
SELECT df.await_instance(:'next', 60);
SELECT df.result(:'next');

-- a key that substitution makes too long fails the node
SELECT df.start('SELECT repeat(''x'', 2000) AS big' |=> 'b' ~> df.limit('SELECT 1', 'k-$b.big', 1)) AS id \gset
SELECT df.await_instance(:'id', 60);
SELECT result FROM df.nodes WHERE instance_id = :'id' AND node_type = 'LIMIT';

-- a df.timeout around the holder abandons it and frees its slot
SELECT df.start(df.timeout(df.limit(df.wait_for_signal('never'), 'lim-t', 1), 0.3)) AS id \gset
SELECT df.await_instance(:'id', 60);
SELECT df.start(df.limit('SELECT ''free again'' AS who', 'lim-t', 1)) AS id \gset
SELECT df.await_instance(:'id', 60);
SELECT df.result(:'id');

-- a BREAK inside the limited subtree leaves the loop and frees the slot,
-- and so does losing a race: the same instance then enters the key again
-- (a slot left behind would make it time out in the queue)
SELECT df.start(df.loop(df.limit('SELECT 1' ~> df.break('out'), 'lim-brk', 1))
				~> df.limit('SELECT ''after break'' AS who', 'lim-brk', 1, queue_timeout => '5 seconds')) AS id \gset
SELECT df.await_instance(:'id', 60), df.result(:'id');
SELECT df.start(df.race(df.limit(df.wait_for_signal('never'), 'lim-race', 1), 'SELECT 2')
				~> df.limit('SELECT ''after race'' AS who', 'lim-race', 1, queue_timeout => '5 seconds')) AS id \gset
SELECT df.await_instance(:'id', 60), df.result(:'id');

-- a key template: variables and named results
SELECT df.start('SELECT 7 AS n' |=> 'o' ~> df.limit('SELECT 1 AS one', 'order-$o.n', 1)
				~> df.limit('SELECT 2 AS two', 'tenant-{sys_label}', 1), label => 'acme') AS id \gset
SELECT df.await_instance(:'id', 60);
SELECT df.start(df.limit('SELECT 1', 'api-rate', rate => 5, burst => 2)) AS id \gset
SELECT df.await_instance(:'id', 60);
RESET ROLE;
SELECT key, max_concurrent, held, queued FROM df.limits
WHERE key IN ('order-7', 'tenant-acme', 'lim-plain') ORDER BY key;
-- a rate limit: the bucket's next admission
SELECT key, rate, burst, next_admission IS NOT NULL AS has_next FROM df.limits WHERE key = 'api-rate';
-- no slot or queue place is left behind, nothing is stuck
SELECT count(*) AS holders FROM df_internal.limit_holders WHERE key LIKE 'lim-%';
SELECT count(*) AS waiters FROM df_internal.limit_waiters WHERE key LIKE 'lim-%';
SELECT problem, detail FROM df.check() WHERE problem LIKE 'limit%';

-- df.check() reports a slot held by a node that ended, a queue place of
-- one, and a queue that nothing will wake (rows written by hand here);
-- a key in a role's own space is named as the role wrote it, with whose
-- (in a transaction rolled back: reconciliation never sees them)
SELECT id AS done FROM df.instances WHERE status = 'completed' ORDER BY id LIMIT 1 \gset
BEGIN;
INSERT INTO df_internal.limit_holders (instance_id, node_id, scope, key, submitted_by, started)
VALUES (:'done', '00000001', :'done' || '::1', 'lim-broken', 'df_user', true);
INSERT INTO df_internal.limit_waiters (instance_id, node_id, scope, key, submitted_by)
VALUES (:'done', '00000002', :'done' || '::1',
		'~' || 'df_user'::regrole::oid || '/lim-stuck', 'df_user');
SELECT problem, regexp_replace(detail, '[0-9a-f]{8}', 'X', 'g') AS detail
FROM df.check() WHERE problem LIKE 'limit%' ORDER BY 1, 2;
ROLLBACK;
SELECT count(*) AS limit_problems FROM df.check() WHERE problem LIKE 'limit%';
-- df.explain shows the node with its settings
SELECT df.explain(df.limit('SELECT 1', 'api', 3, queue_timeout => '5 seconds'));

-- another role sees no key it has nothing in, nor the queue's places
SET ROLE df_user;
SELECT df.start(df.limit(df.wait_for_signal('go'), 'lim-v', 1)) AS holder \gset
SELECT lim_until(format('EXISTS (SELECT 1 FROM df.limits WHERE key = %L AND held = 1)', 'lim-v')) AS holding;
SELECT df.start(df.limit('SELECT 1', 'lim-v', 1)) AS queued \gset
SELECT lim_until(format('EXISTS (SELECT 1 FROM df.limit_queue WHERE key = %L)', 'lim-v')) AS owner_sees_queue;
RESET ROLE;
CREATE ROLE df_lim_other;
GRANT USAGE ON SCHEMA df TO df_lim_other;
-- df.check() granted to a monitoring role runs for it
GRANT EXECUTE ON FUNCTION df.check() TO df_lim_other;
SET ROLE df_lim_other;
SELECT count(*) AS monitor_sees_limit_problems FROM df.check() WHERE problem LIKE 'limit%';
SELECT count(*) AS others_see FROM df.limits WHERE key = 'lim-v';
SELECT count(*) AS others_see_queued FROM df.limit_queue WHERE key = 'lim-v';
RESET ROLE;
SELECT count(*) AS superuser_sees_queued FROM df.limit_queue WHERE key = 'lim-v';
REVOKE EXECUTE ON FUNCTION df.check() FROM df_lim_other;
REVOKE USAGE ON SCHEMA df FROM df_lim_other;
DROP ROLE df_lim_other;
SET ROLE df_user;
SELECT df.signal(:'holder', 'go', '{}');
SELECT df.await_instance(:'holder', 60), df.await_instance(:'queued', 60);
DROP FUNCTION lim_until(text);

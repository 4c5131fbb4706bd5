-- Keyed locks (docs/design/locks-and-limits.md §1): df.with_lock builds node
-- LOCK; the builder's JSON and its validation; holding, waiting (FIFO),
-- shared holders, fencing tokens ($lock.token, only growing), a nested lock
-- out of order, wait_timeout, df.locks and its visibility, df.check.

-- builders: the keys as given, mode and wait_timeout only when not the default
SELECT df.with_lock('SELECT 1', ARRAY['order:{order_id}'])::jsonb - 'id' - 'left_node' AS exclusive;
SELECT (df.with_lock('SELECT 1', ARRAY['b', 'a'], 'shared', '1.5 seconds')::jsonb)->>'query' AS shared_timeout;
SELECT df.with_lock('SELECT 1', '{a}') = df.with_lock('SELECT 1', '{a}', 'exclusive', NULL) AS defaults_add_nothing;
-- validation
SELECT df.with_lock('SELECT 1', NULL);
SELECT df.with_lock(NULL, '{a}');
SELECT df.with_lock('SELECT 1', '{}');
SELECT df.with_lock('SELECT 1', ARRAY['a', NULL]);
SELECT df.with_lock('SELECT 1', ARRAY['a', '']);
SELECT df.with_lock('SELECT 1', ARRAY[repeat('k', 1001)]);
SELECT df.with_lock('SELECT 1', '{a}', 'read');
SELECT df.with_lock('SELECT 1', '{a}', wait_timeout => '0 seconds');
SELECT df.with_lock('SELECT 1', '{{a},{b}}');
SELECT df.with_lock('SELECT 1', (SELECT array_agg(i::text) FROM generate_series(1, 65) i));
SET ROLE df_user;
SELECT df.setvar('order_id', 'o-7');
-- a hand-written LOCK node is checked by df.start
SELECT df.start('{"id":"a1b2c3d4","node_type":"LOCK","query":"{\"keys\":[]}","left_node":{"id":"b1b2c3d4","node_type":"SQL","query":"SELECT 1"}}');
SELECT df.start('{"id":"a1b2c3d4","node_type":"LOCK","query":"{\"keys\":[\"a\"],\"mode\":\"x\"}","left_node":{"id":"b1b2c3d4","node_type":"SQL","query":"SELECT 1"}}');
SELECT df.start('{"id":"a1b2c3d4","node_type":"LOCK","query":"{\"keys\":[\"a\"],\"wait\":1}","left_node":{"id":"b1b2c3d4","node_type":"SQL","query":"SELECT 1"}}');
SELECT df.start('{"id":"a1b2c3d4","node_type":"LOCK","query":"{\"keys\":[\"a\"]}"}');


-- a step inside sees $lock.token; tokens of one key only grow
SELECT df.start(df.with_lock('SELECT $lock.token AS t', ARRAY['order:{order_id}']) |=> 'r' ~> 'SELECT $r.t AS t') AS a1 \gset
SELECT df.await_instance(:'a1');
SELECT df.start(df.with_lock('SELECT $lock.token AS t', ARRAY['order:{order_id}']) |=> 'r' ~> 'SELECT $r.t AS t') AS a2 \gset
SELECT df.await_instance(:'a2');
SELECT (SELECT (result->'rows'->0->>'t')::bigint FROM df.nodes n JOIN df.instances i ON i.root_node = n.id AND i.id = n.instance_id WHERE i.id = :'a2')
     > (SELECT (result->'rows'->0->>'t')::bigint FROM df.nodes n JOIN df.instances i ON i.root_node = n.id AND i.id = n.instance_id WHERE i.id = :'a1') AS token_grew;
-- $lock is gone after the lock
SELECT df.start(df.with_lock('SELECT 1', '{x}') ~> 'SELECT $lock.token AS t') AS a3 \gset
SELECT df.await_instance(:'a3');
SELECT node_type, status, result #>> '{}' AS after_the_lock FROM df.nodes WHERE instance_id = :'a3' AND node_type = 'SQL' AND query LIKE '%lock.token%';

-- a holder and a FIFO waiter: the waiter gets the key when the holder ends
SELECT df.start(df.with_lock(df.wait_for_signal('go'), '{k1}'), 'holder') AS h \gset
SELECT wait_until(format($$SELECT EXISTS (SELECT 1 FROM df.locks WHERE holder = %L AND state = 'held')$$, :'h'));
SELECT df.start(df.with_lock('SELECT 1 AS got', '{k1}'), 'waiter') AS w \gset
SELECT wait_until(format($$SELECT EXISTS (SELECT 1 FROM df.locks WHERE holder = %L AND state = 'waiting')$$, :'w'));
SELECT key, holder = :'h' AS is_holder, mode, state, waiters FROM df.locks WHERE key = 'k1' ORDER BY state;
SELECT df.status(:'w') AS waiter_status;
-- a waiting node shows its keys and what it waits for; df.locks the holder's token
SELECT status, status_details->'lock_keys' AS lock_keys, status_details->>'lock_mode' AS mode,
       status_details->>'lock_state' AS state, status_details->>'waiting_for' AS waiting_for
FROM df.nodes WHERE instance_id = :'w' AND node_type = 'LOCK';
SELECT token > 0 AS holder_has_token FROM df.locks WHERE holder = :'h';
RESET ROLE;
SELECT count(*) AS problems FROM df.check() WHERE instance_id IN (:'h', :'w');
-- df.check: a waiter that nothing wakes, an entry of an ended node (made by hand)
DELETE FROM df_internal.locks WHERE instance_id = :'w';
INSERT INTO df_internal.locks (key, instance_id, node_id, scope, mode, held, token, since)
SELECT 'k9', id, root_node, id || '::1', 'exclusive', true, 1, now()
FROM df.instances WHERE id = :'a1';
SELECT instance_id = :'w' AS is_waiter, problem, detail ~ 'has no waiting entry and no task' AS says_why
FROM df.check() WHERE instance_id IN (:'w', :'a1') AND problem = 'lock_wait_stuck';
SELECT problem, detail ~ 'a held entry for key k9 belongs to LOCK node' AS says_why
FROM df.check() WHERE instance_id = :'a1';
DELETE FROM df_internal.locks WHERE instance_id = :'a1';
SET ROLE df_user;
SELECT df.cancel(:'w') IS NOT NULL AS cancelled;
SELECT df.signal(:'h', 'go', '1');
SELECT df.await_instance(:'h');
SELECT count(*) AS left_over FROM df.locks WHERE key = 'k1';

-- shared holders at once; an exclusive request waits for both
SELECT df.start(df.with_lock(df.wait_for_signal('go'), '{s}', 'shared')) AS s1 \gset
SELECT df.start(df.with_lock(df.wait_for_signal('go'), '{s}', 'shared')) AS s2 \gset
SELECT wait_until($$SELECT (SELECT count(*) FROM df.locks WHERE key = 's' AND state = 'held') = 2$$);
SELECT df.start(df.with_lock('SELECT 1', '{s}')) AS sx \gset
SELECT wait_until(format($$SELECT EXISTS (SELECT 1 FROM df.locks WHERE holder = %L AND state = 'waiting')$$, :'sx'));
SELECT mode, state, count(*) FROM df.locks WHERE key = 's' GROUP BY 1, 2 ORDER BY 1, 2;
SELECT df.signal(:'s1', 'go', '1');
SELECT df.await_instance(:'s1');
SELECT state FROM df.locks WHERE holder = :'sx';
SELECT df.signal(:'s2', 'go', '1');
SELECT df.await_instance(:'s2'), df.await_instance(:'sx');
-- a node that waited has it in its history
SELECT kind, detail->>'key' AS key, jsonb_typeof(detail->'tokens'->'s') AS token
FROM df.history(:'sx') WHERE kind LIKE 'lock%' ORDER BY 1;

-- wait_timeout: kind lock_timeout, and the waiter leaves the queue
SELECT df.start(df.with_lock(df.wait_for_signal('go'), '{k2}')) AS h2 \gset
SELECT wait_until(format($$SELECT EXISTS (SELECT 1 FROM df.locks WHERE holder = %L AND state = 'held')$$, :'h2'));
SELECT df.start(df.with_lock('SELECT 1', '{k2}', wait_timeout => '0.3 seconds')) AS t \gset
SELECT df.await_instance(:'t');
SELECT status, result #>> '{}' AS error, status_details->'error'->>'code' AS code
FROM df.nodes WHERE instance_id = :'t' AND node_type = 'LOCK';
SELECT count(*) AS waiting FROM df.locks WHERE key = 'k2' AND state = 'waiting';
SELECT kind, detail FROM df.history(:'t') WHERE kind LIKE 'lock%' ORDER BY 1;
-- caught like any error by its kind
SELECT df.start(df.catch(df.with_lock('SELECT 1', '{k2}', wait_timeout => '0.1 seconds'),
                         'SELECT $error.kind AS kind', '{lock_timeout}')) AS c \gset
SELECT df.await_instance(:'c');
SELECT result->'rows'->0->>'kind' AS caught FROM df.nodes n JOIN df.instances i ON i.id = n.instance_id AND i.root_node = n.id WHERE i.id = :'c';
SELECT df.cancel(:'h2') IS NOT NULL AS cancelled;
SELECT wait_until($$SELECT NOT EXISTS (SELECT 1 FROM df.locks WHERE key = 'k2')$$);

-- nested locks: in order they complete, out of order they fail naming both keys
SELECT df.start(df.with_lock(df.with_lock('SELECT 1', '{b}'), '{a}')) AS n1 \gset
SELECT df.await_instance(:'n1');
SELECT df.start(df.with_lock(df.with_lock('SELECT 1', '{a}'), '{b}')) AS n2 \gset
SELECT df.await_instance(:'n2');
SELECT result #>> '{}' AS error FROM df.nodes WHERE instance_id = :'n2' AND node_type = 'LOCK' AND status = 'failed' ORDER BY created_at LIMIT 1;
SELECT status_details->'error'->>'code' AS code FROM df.nodes
WHERE instance_id = :'n2' AND node_type = 'LOCK' AND status = 'failed' AND result #>> '{}' LIKE 'lock order%';
SELECT df.start(df.with_lock(df.with_lock('SELECT 1', ARRAY['order:{order_id}']), ARRAY['order:{order_id}'])) AS n3 \gset
SELECT df.await_instance(:'n3');
SELECT result #>> '{}' AS error FROM df.nodes WHERE instance_id = :'n3' AND node_type = 'LOCK' AND status = 'failed' AND result #>> '{}' LIKE 'lock order%';
-- a key that substitutes to nothing
SELECT df.start('SELECT '''' AS k' |=> 'r' ~> df.with_lock('SELECT 1', '{$r.k}')) AS e \gset
SELECT df.await_instance(:'e');
SELECT result #>> '{}' AS error FROM df.nodes WHERE instance_id = :'e' AND node_type = 'LOCK';

-- a scope abandoned above a holder releases its key while the instance goes on:
-- a df.timeout (caught), a lost race branch
SELECT df.start(df.catch(df.timeout(df.with_lock(df.wait_for_signal('never'), '{t1}'), 0.3), 'SELECT 1')
                ~> df.wait_for_signal('hold')) AS to1 \gset
SELECT wait_until(format($$SELECT EXISTS (SELECT 1 FROM df.nodes WHERE instance_id = %L
                  AND node_type = 'SIGNAL' AND query LIKE '%%hold%%' AND status = 'running')$$, :'to1'));
SELECT df.status(:'to1'), count(*) AS t1_entries FROM df.locks WHERE key = 't1';
SELECT df.start(df.race(df.with_lock(df.wait_for_signal('never'), '{r1}'), df.sleep(0.3))
                ~> df.wait_for_signal('hold')) AS ra \gset
SELECT wait_until(format($$SELECT EXISTS (SELECT 1 FROM df.nodes WHERE instance_id = %L
                  AND node_type = 'SIGNAL' AND query LIKE '%%hold%%' AND status = 'running')$$, :'ra'));
SELECT df.status(:'ra'), count(*) AS r1_entries FROM df.locks WHERE key = 'r1';
SELECT df.cancel(:'to1') IS NOT NULL AS cancelled, df.cancel(:'ra') IS NOT NULL AS cancelled;
-- two branches of one instance on one key: one after the other
SELECT df.start(df.with_lock('SELECT $lock.token AS t', '{j}') |=> 'x'
                & df.with_lock('SELECT $lock.token AS t', '{j}') |=> 'y') AS jn \gset
SELECT df.await_instance(:'jn');
SELECT count(DISTINCT (result->'rows'->0->>'t')) AS distinct_tokens
FROM df.nodes WHERE instance_id = :'jn' AND node_type = 'SQL';

-- another role sees none of these instances' locks
SELECT df.start(df.with_lock(df.wait_for_signal('go'), '{k3}')) AS v \gset
SELECT wait_until(format($$SELECT EXISTS (SELECT 1 FROM df.locks WHERE holder = %L)$$, :'v'));
RESET ROLE;
CREATE ROLE lock_other;
GRANT USAGE ON SCHEMA df TO lock_other;
SET ROLE lock_other;
SELECT count(*) AS others_see FROM df.locks;
RESET ROLE;
SELECT count(*) > 0 AS superuser_sees FROM df.locks WHERE key = 'k3';
SET ROLE df_user;
SELECT df.cancel(:'v') IS NOT NULL AS cancelled;
SELECT df.unsetvar('order_id');
RESET ROLE;
SELECT wait_until($$SELECT NOT EXISTS (SELECT 1 FROM df_internal.locks) AND NOT EXISTS (SELECT 1 FROM df_internal.lock_keys)$$) AS all_released;
REVOKE USAGE ON SCHEMA df FROM lock_other;
DROP ROLE lock_other;

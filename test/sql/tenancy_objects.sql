-- Owners and grants of the coordination objects (docs/design/tenancy.md):
-- one role cannot trip, reconfigure, read or block another's circuit
-- breakers, limits, topics and lock keys through a name they share; a
-- shared object is created, owned and granted; what blocks a waiter is
-- visible.  One part per finding, each failing without the spaces.
CREATE ROLE tc_alice LOGIN;
CREATE ROLE tc_bob LOGIN;
SELECT df.grant_usage('tc_alice', include_http => true) IS NOT NULL AS granted;
SELECT df.grant_usage('tc_bob', include_http => true) IS NOT NULL AS granted;
GRANT EXECUTE ON FUNCTION df.create_circuit_breaker(text, int, int, int, interval, int, interval, int, text[]),
	df.drop_circuit_breaker(text), df.reset_circuit_breaker(text),
	df.create_limit(text, int, float8, int), df.create_lock_space(text), df.create_topic(text),
	df.publish_event(text, jsonb, text), df.subscribe(text, text, text, jsonb) TO tc_alice, tc_bob;
CREATE TABLE tc_seen (who text, what text);
GRANT INSERT, SELECT ON tc_seen TO tc_alice, tc_bob;
GRANT EXECUTE ON FUNCTION public.wait_until(text, int) TO tc_alice, tc_bob;
-- what every role sees of the lock entries (the test's eyes only)
CREATE FUNCTION tc_lock_waiting(k text) RETURNS boolean LANGUAGE sql SECURITY DEFINER
	SET search_path = pg_catalog AS
	$$SELECT EXISTS (SELECT 1 FROM df.locks WHERE key = k AND state = 'waiting')$$;
GRANT EXECUTE ON FUNCTION tc_lock_waiting(text) TO tc_alice, tc_bob;

-- 1. bob cannot trip alice's circuit breaker by naming it
SET ROLE tc_alice;
SELECT df.create_circuit_breaker('tc_payments', minimum_calls => 2, window_size => 2,
								 wait_duration => '1 hour', record_on => '{sql:22}');
SET ROLE tc_bob;
SELECT df.start(df.with_breaker('SELECT 1/0', 'tc_payments')) AS b1 \gset
SELECT df.start(df.with_breaker('SELECT 1/0', 'tc_payments')) AS b2 \gset
SELECT df.start(df.with_breaker('SELECT 1/0', 'tc_payments')) AS b3 \gset
SELECT df.await_instance(:'b1'), df.await_instance(:'b2'), df.await_instance(:'b3');
SELECT status, result FROM df.instance_nodes(:'b3') WHERE node_type = 'BREAKER';
-- his HTTP step naming it is refused before any call
SELECT df.start(df.http('http://example.com/x', 'GET', breaker => 'tc_payments')) AS bh \gset
SELECT df.await_instance(:'bh');
SELECT result FROM df.instance_nodes(:'bh') WHERE node_type = 'HTTP';
-- nor can he grant it, drop it or reset it
SELECT df.grant_circuit_breaker('tc_payments', 'tc_bob');
SET ROLE tc_alice;
SELECT name, state, calls_in_window FROM df.circuit_breakers WHERE name = 'tc_payments';
SELECT df.start(df.with_breaker('SELECT 42', 'tc_payments')) AS a1 \gset
SELECT df.await_instance(:'a1'), df.result(:'a1');
-- granted, bob's calls count in it
SELECT df.grant_circuit_breaker('tc_payments', 'tc_bob');
SET ROLE tc_bob;
SELECT df.start(df.with_breaker('SELECT 1/0', 'tc_payments')) AS b4 \gset
SELECT df.start(df.with_breaker('SELECT 1/0', 'tc_payments')) AS b5 \gset
SELECT df.await_instance(:'b4'), df.await_instance(:'b5');
SELECT name, state, opened_by FROM df.circuit_breakers WHERE name = 'tc_payments';
-- alice sees that another role's calls opened it; a superuser sees whose
SET ROLE tc_alice;
SELECT name, state, opened_by FROM df.circuit_breakers WHERE name = 'tc_payments';
RESET ROLE;
SELECT name, state, opened_by FROM df.circuit_breakers WHERE name = 'tc_payments';
SELECT to_state, by_role FROM df.circuit_breaker_history WHERE name = 'tc_payments' ORDER BY at;
SET ROLE tc_alice;
SELECT df.reset_circuit_breaker('tc_payments');
SELECT df.revoke_circuit_breaker('tc_payments', 'tc_bob');
SELECT kind, name, owner, grants FROM df.shared_objects WHERE name = 'tc_payments';

-- 2. bob cannot reconfigure alice's limit: his key is his own
SET ROLE tc_alice;
SELECT df.start(df.limit(df.wait_for_signal('go'), 'tc_api2', max_concurrent => 1)) AS l1 \gset
SELECT wait_until($$SELECT EXISTS (SELECT 1 FROM df.limits WHERE key = 'tc_api2' AND held = 1)$$);
SELECT df.start(df.limit('SELECT 2', 'tc_api2', max_concurrent => 1)) AS l2 \gset
SELECT df.start(df.limit('SELECT 3', 'tc_api2', max_concurrent => 1)) AS l3 \gset
SELECT wait_until($$SELECT EXISTS (SELECT 1 FROM df.limits WHERE key = 'tc_api2' AND queued = 2)$$);
SET ROLE tc_bob;
SELECT df.start(df.limit('SELECT 1', 'tc_api2', max_concurrent => 1, rate => 0.001)) AS lb \gset
SELECT df.await_instance(:'lb', 10);
SET ROLE tc_alice;
SELECT df.signal(:'l1', 'go') IS NOT NULL AS signalled;
SELECT df.await_instance(:'l1', 10), df.await_instance(:'l2', 10), df.await_instance(:'l3', 10);
RESET ROLE;
SELECT regexp_replace(key, '^~[0-9]+/', '') AS key, max_concurrent, rate,
	   substring(key, '^~([0-9]+)/')::oid::regrole AS space
FROM df_internal.limits WHERE key LIKE '%tc_api2' ORDER BY 4;
-- a shared limit: its settings win over the node's, for every role granted it
SET ROLE tc_alice;
SELECT df.create_limit('tc_shared_api', max_concurrent => 2);
SELECT df.create_limit('tc_shared_api', max_concurrent => 2);
SELECT df.create_limit('~x', max_concurrent => 2);
SELECT df.create_limit('tc_nothing');
SELECT df.grant_limit('tc_shared_api', 'tc_bob');
SET ROLE tc_bob;
SELECT df.start(df.limit('SELECT 1', 'tc_shared_api', max_concurrent => 100)) AS ls \gset
SELECT df.await_instance(:'ls', 10);
SELECT df.drop_limit('tc_shared_api');
RESET ROLE;
SELECT key, max_concurrent FROM df_internal.limits WHERE key = 'tc_shared_api';

-- 3. bob cannot read alice's events: subscription and wait
SET ROLE tc_bob;
SELECT df.subscribe('tc_spy', 'tc_alice_orders',
					$$INSERT INTO tc_seen SELECT 'bob', $event.payload$$);
SELECT df.start(df.wait_for_event('tc_alice_orders', timeout_seconds => 2)) AS bw \gset
SET ROLE tc_alice;
SELECT df.subscribe('tc_mine', 'tc_alice_orders',
					$$INSERT INTO tc_seen SELECT 'alice', $event.payload$$);
SELECT df.publish_event('tc_alice_orders', '{"card": "4111-1111"}') IS NOT NULL AS published;
SELECT wait_until($$SELECT EXISTS (SELECT 1 FROM tc_seen WHERE who = 'alice')$$);
SET ROLE tc_bob;
SELECT df.await_instance(:'bw', 10), df.result(:'bw');
RESET ROLE;
SELECT engine_idle();
SELECT who, what FROM tc_seen ORDER BY who;
-- a shared topic: bob may publish to it, and read it once granted subscribe
SET ROLE tc_alice;
SELECT df.create_topic('tc_orders');
SELECT df.grant_topic('tc_orders', 'tc_bob', '{publish}');
SELECT df.grant_topic('tc_orders', 'tc_bob', '{read}');
SELECT df.subscribe('tc_orders_in', 'tc_orders', $$INSERT INTO tc_seen SELECT 'alice-shared', $event.payload$$);
SET ROLE tc_bob;
SELECT df.subscribe('tc_orders_spy', 'tc_orders', $$INSERT INTO tc_seen SELECT 'bob-shared', $event.payload$$);
SELECT df.publish_event('tc_orders', '{"from": "bob"}') IS NOT NULL AS published;
RESET ROLE;
SELECT engine_idle();
SELECT who, what FROM tc_seen WHERE who LIKE '%shared' ORDER BY who, what;
SET ROLE tc_alice;
SELECT df.grant_topic('tc_orders', 'tc_bob', '{subscribe}');
SELECT df.publish_event('tc_orders', '{"from": "alice"}') IS NOT NULL AS published;
RESET ROLE;
SELECT engine_idle();
SELECT who, what FROM tc_seen WHERE who LIKE '%shared' ORDER BY who, what;
SELECT kind, name, owner, grants FROM df.shared_objects WHERE name = 'tc_orders';
-- df.events: what each role published, its own topics, and the shared
-- topics it may subscribe to
SET ROLE tc_bob;
SELECT topic, space, published_by, payload FROM df.events ORDER BY event_id;
SET ROLE tc_alice;
SELECT topic, space, published_by, payload FROM df.events ORDER BY event_id;
SET ROLE df_user;
SELECT count(*) AS others_events FROM df.events WHERE published_by LIKE 'tc_%';
RESET ROLE;
SELECT has_table_privilege('public', 'df_internal.bus_events', 'SELECT') AS whole_table_to_public,
	   has_column_privilege('public', 'df_internal.bus_events', 'xid', 'SELECT') AS xid_to_public;
SET ROLE tc_bob;
SELECT df.unsubscribe('tc_spy'), df.unsubscribe('tc_orders_spy');
SET ROLE tc_alice;
SELECT df.unsubscribe('tc_mine'), df.unsubscribe('tc_orders_in');
SELECT df.drop_topic('tc_orders');

-- 4. bob cannot block alice's lock keys
SET ROLE tc_alice;
SELECT df.start(df.with_lock(df.wait_for_signal('go'), ARRAY['order:42'])) AS k1 \gset
SELECT wait_until($$SELECT EXISTS (SELECT 1 FROM df.locks WHERE key = 'order:42' AND state = 'held')$$);
SET ROLE tc_bob;
SELECT df.start(df.with_lock('SELECT 1', ARRAY['order:42'], wait_timeout => '2 seconds')) AS kb \gset
SELECT df.await_instance(:'kb', 10);
-- a shared lock space: its keys exclude each other across the roles granted it,
-- and the waiter sees that another role holds the key
SET ROLE tc_alice;
SELECT df.create_lock_space('order:x');
SELECT df.create_lock_space('shop');
SELECT df.grant_lock_space('shop', 'tc_bob');
SELECT df.start(df.with_lock(df.wait_for_signal('go'), ARRAY['shop:7'])) AS k2 \gset
SELECT wait_until($$SELECT EXISTS (SELECT 1 FROM df.locks WHERE key = 'shop:7' AND state = 'held')$$);
SET ROLE tc_bob;
SELECT df.start(df.with_lock('SELECT 1', ARRAY['shop:7'])) AS kb2 \gset
SELECT wait_until($$SELECT tc_lock_waiting('shop:7')$$);
SELECT key, state, space, blocked_by, held_by FROM df.locks WHERE holder = :'kb2';
SELECT waiting_on FROM df.list_instances() WHERE instance_id = :'kb2';
RESET ROLE;
SELECT key, state, space, blocked_by FROM df.locks WHERE holder IN (:'k2', :'kb2') ORDER BY state;
SELECT held_by = :'k2' AS held_by_alice FROM df.locks WHERE holder = :'kb2';
SELECT key, state, space IS NOT NULL AS own_space FROM df.locks WHERE holder = :'k1';
SET ROLE tc_alice;
SELECT df.signal(:'k1', 'go') IS NOT NULL, df.signal(:'k2', 'go') IS NOT NULL;
SELECT df.await_instance(:'k1', 10), df.await_instance(:'k2', 10);
SET ROLE tc_bob;
SELECT df.await_instance(:'kb2', 10);
SELECT df.drop_lock_space('shop');
SET ROLE tc_alice;
SELECT df.drop_lock_space('shop');
SELECT df.drop_circuit_breaker('tc_payments');
RESET ROLE;
SELECT count(*) AS grants_left FROM df_internal.object_grants WHERE name IN ('tc_payments', 'shop', 'tc_orders');
SELECT engine_idle();

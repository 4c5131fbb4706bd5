-- The OrderProcessing workflow: one order across the order,
-- payment, inventory and shipping services of services.pl, as a saga.
--
-- psql variables: :order_url :payment_url :inventory_url :shipping_url
-- (http://127.0.0.1:PORT of each service; 'task:' for a service whose
-- calls external workers make, workers.py: TASK steps of queue
-- shop.<service> instead of HTTP steps).  Run as a superuser; the
-- workflows run as the role shop (steps with its rights).
\set ON_ERROR_STOP 1

DO $$ BEGIN
	IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'shop') THEN
		CREATE ROLE shop LOGIN;
	END IF;
END $$;
SELECT df.grant_usage('shop', include_http => true);
GRANT EXECUTE ON FUNCTION df.create_circuit_breaker(text, int, int, int, interval, int, interval, int, text[]),
	df.reset_circuit_breaker(text), df.publish_event(text, jsonb, text),
	df.subscribe(text, text, text, jsonb), df.create_lock_space(text), df.create_topic(text) TO shop;
-- a second service's role, which reads the shop's completed orders
DO $$ BEGIN
	IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'shop_reports') THEN
		CREATE ROLE shop_reports LOGIN;
	END IF;
END $$;
SELECT df.grant_usage('shop_reports');
GRANT EXECUTE ON FUNCTION df.subscribe(text, text, text, jsonb) TO shop_reports;

DROP SCHEMA IF EXISTS shop CASCADE;
CREATE SCHEMA shop AUTHORIZATION shop;
SET ROLE shop;

CREATE TABLE shop.services (name text PRIMARY KEY, url text NOT NULL);
INSERT INTO shop.services VALUES ('order', :'order_url'), ('payment', :'payment_url'),
	('inventory', :'inventory_url'), ('shipping', :'shipping_url');

-- what the subscription's notification workflow writes
CREATE TABLE shop.notifications (order_id text PRIMARY KEY, event_id bigint NOT NULL,
								 sent_at timestamptz NOT NULL DEFAULT now());

-- an HTTP step that posts body (JSON text, a template) to a service's
-- path; any answer but 2xx fails it (a 429 or a 503 too, which df.retry
-- and the undos' default policy retry; a 402 is not retried)
-- A service whose url is 'task:' is called by a worker of queue
-- shop.<service> (workers.py), with the path, the key and the body (a
-- template, substituted when the step starts) as the task's payload.
CREATE FUNCTION shop.call(service text, path text, body text, key text DEFAULT NULL,
						  breaker text DEFAULT NULL) RETURNS text
LANGUAGE sql STABLE AS $$
	SELECT CASE WHEN s.url = 'task:' THEN
		df.task('shop.' || service,
				'{"path": ' || to_json(path) || ', "key": ' || to_json(key) || ', "body": ' || body || '}',
				timeout_seconds => 10)
	ELSE
		df.http(s.url || path, 'POST', body, '{"Content-Type": "application/json"}', 10,
				fail_on => '4xx,5xx', idempotency_key => key, breaker => breaker)
	END
	FROM shop.services s WHERE s.name = service
$$;

-- The workflow of one order, o = {order_id, customer, card, amount,
-- lines: [{sku, qty}, ...]}.  Each forward step is paired with its undo
-- (<~>); when a later step fails, the saga undoes the earlier ones in
-- reverse order.  The stock of the order's SKUs is reserved under keyed
-- locks (taken in one global order, so orders for {B,A} and {A,B} cannot
-- deadlock) and through the inventory breaker (an open breaker fails the
-- call at once, and is not retried); every call is retried with back-off
-- on transient failures, but a decline (402) fails at once; the shipment has a
-- deadline, and its undo is registered before it, as the outcome of a
-- call that timed out is unknown.  Every call carries an Idempotency-Key of the order, so a
-- retried or repeated call charges, reserves and ships once.
CREATE FUNCTION shop.order_workflow(o jsonb) RETURNS text
LANGUAGE sql STABLE AS $$
	SELECT df.saga(df.retry(
		(shop.call('order', '/orders', o::text, id || ':order')
		   <~> shop.call('order', '/orders/cancel', reft, id || ':cancel'))
		~> (df.with_lock(shop.call('inventory', '/reservations',
								   -- the lock's fencing token goes with the call
								   rtrim((ref || jsonb_build_object('lines', o -> 'lines'))::text, '}')
									   || ', "fence": $lock.token}',
								   id || ':reserve', breaker => 'inventory'),
						 skus, wait_timeout => '30 seconds')
			  <~> shop.call('inventory', '/releases', reft, id || ':release'))
		~> (df.retry(shop.call('payment', '/charges',
							   (ref || jsonb_build_object('amount', o -> 'amount', 'card', o -> 'card'))::text,
							   id || ':charge'),
					 max_attempts => 5, initial_interval => '200 milliseconds',
					 max_interval => '2 seconds')
			  <~> shop.call('payment', '/refunds', reft, id || ':refund'))
		-- a call that times out may still have shipped: its undo is
		-- registered before it (a delete of nothing is a no-op)
		~> ('SELECT ''shipping'' AS step'
			  <~> shop.call('shipping', '/shipments/delete', reft, id || ':unship'))
		~> df.timeout(shop.call('shipping', '/shipments',
								(ref || jsonb_build_object('address', o -> 'customer'))::text,
								id || ':ship'), 3)
		~> shop.call('order', '/orders/confirm', reft, id || ':confirm')
		~> df.publish('order.completed', reft, id),
		-- every call above retried on 5xx, 429, timeouts and dropped
		-- connections, 4 tries in all (the charge has its own policy)
		max_attempts => 4, initial_interval => '200 milliseconds', max_interval => '1 second'))
	FROM (SELECT o ->> 'order_id' AS id,
				 jsonb_build_object('order_id', o ->> 'order_id') AS ref,
				 jsonb_build_object('order_id', o ->> 'order_id')::text AS reft,
				 ARRAY(SELECT DISTINCT 'sku:' || (l ->> 'sku')
					   FROM jsonb_array_elements(o -> 'lines') l) AS skus) k
$$;

-- Place an order: one instance per order id, however often it is sent.
CREATE FUNCTION shop.place(o jsonb) RETURNS text
LANGUAGE sql VOLATILE AS $$
	SELECT df.start(shop.order_workflow(o), 'order ' || (o ->> 'order_id'),
					idempotency_key => 'order:' || (o ->> 'order_id'))
$$;

-- The inventory breaker: open after 3 failures in the last 5 calls, for 2 s.
SELECT df.create_circuit_breaker('inventory', failure_rate_threshold => 50, minimum_calls => 3,
								 window_size => 5, wait_duration => '2 seconds',
								 half_open_calls => 1);

-- What the shop shares (docs/design/tenancy.md).  Every name a role uses is
-- its own unless it is a shared object it owns or was granted: the shop's
-- instances all run as shop, so they share its SKU keys, its limit keys and
-- its topics without this; another role's instances (another tenant's
-- shop) would have keys and topics of their own of the same names.  Here
-- the SKU lock keys and the order.completed topic are made shared objects
-- owned by shop, and the reports service's role may read the topic (and
-- only that: it cannot publish to it, take the SKU keys or count calls in
-- the inventory breaker).  A warehouse service whose own workflows reserve
-- stock would be granted the SKU keys with df.grant_lock_space('sku',
-- 'warehouse'), and the breaker with df.grant_circuit_breaker.
SELECT df.create_lock_space('sku');
SELECT df.create_topic('order.completed');
SELECT df.grant_topic('order.completed', 'shop_reports', '{subscribe}');

-- A completed order's event starts a notification workflow (exactly once
-- per event, with $event bound).
SELECT df.subscribe('notify', 'order.completed',
	$w$INSERT INTO shop.notifications (order_id, event_id)
	   SELECT $event.payload::jsonb ->> 'order_id', $event.event_id::bigint$w$);
RESET ROLE;

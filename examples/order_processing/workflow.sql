-- The OrderProcessing workflow (issue 20): one order across the order,
-- payment, inventory and shipping services of services.pl, as a saga.
--
-- psql variables: :order_url :payment_url :inventory_url :shipping_url
-- (http://127.0.0.1:PORT of each service).  Run as a superuser; the
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
	df.subscribe(text, text, text, jsonb) TO shop;

DROP SCHEMA IF EXISTS shop CASCADE;
CREATE SCHEMA shop AUTHORIZATION shop;
SET ROLE shop;

CREATE TABLE shop.services (name text PRIMARY KEY, url text NOT NULL);
INSERT INTO shop.services VALUES ('order', :'order_url'), ('payment', :'payment_url'),
	('inventory', :'inventory_url'), ('shipping', :'shipping_url');

-- what the subscription's notification workflow writes
CREATE TABLE shop.notifications (order_id text PRIMARY KEY, event_id bigint NOT NULL,
								 sent_at timestamptz NOT NULL DEFAULT now());

-- an HTTP step that posts body to a service's path
CREATE FUNCTION shop.call(service text, path text, body jsonb, key text DEFAULT NULL,
						  breaker text DEFAULT NULL, fail_on text DEFAULT NULL) RETURNS text
LANGUAGE sql STABLE AS $$
	SELECT df.http((SELECT url FROM shop.services WHERE name = service) || path, 'POST',
				   body::text, '{"Content-Type": "application/json"}', 10,
				   fail_on => fail_on, idempotency_key => key, breaker => breaker)
$$;

-- The workflow of one order, o = {order_id, customer, card, amount,
-- lines: [{sku, qty}, ...]}.  Each forward step is paired with its undo
-- (<~>); when a later step fails, the saga undoes the earlier ones in
-- reverse order.  The stock of the order's SKUs is reserved under keyed
-- locks (taken in one global order, so orders for {B,A} and {A,B} cannot
-- deadlock) and through the inventory breaker; the charge is retried
-- with back-off, but a decline (402) fails at once; the shipment has a
-- deadline.  Every call carries an Idempotency-Key of the order, so a
-- retried or repeated call charges, reserves and ships once.
CREATE FUNCTION shop.order_workflow(o jsonb) RETURNS text
LANGUAGE sql STABLE AS $$
	SELECT df.saga(
		(shop.call('order', '/orders', o, id || ':order')
		   <~> shop.call('order', '/orders/cancel', ref, id || ':cancel'))
		~> (df.with_lock(shop.call('inventory', '/reservations',
								   ref || jsonb_build_object('lines', o -> 'lines'),
								   id || ':reserve', breaker => 'inventory'),
						 skus, wait_timeout => '30 seconds')
			  <~> shop.call('inventory', '/releases', ref, id || ':release'))
		~> (df.retry(shop.call('payment', '/charges',
							   ref || jsonb_build_object('amount', o -> 'amount', 'card', o -> 'card'),
							   id || ':charge', fail_on => '402'),
					 max_attempts => 5, initial_interval => '200 milliseconds',
					 max_interval => '2 seconds')
			  <~> shop.call('payment', '/refunds', ref, id || ':refund'))
		~> (df.timeout(shop.call('shipping', '/shipments',
								 ref || jsonb_build_object('address', o -> 'customer'),
								 id || ':ship'), 3)
			  <~> shop.call('shipping', '/shipments/delete', ref, id || ':unship'))
		~> shop.call('order', '/orders/confirm', ref, id || ':confirm')
		~> df.publish('order.completed', ref::text, id))
	FROM (SELECT o ->> 'order_id' AS id,
				 jsonb_build_object('order_id', o ->> 'order_id') AS ref,
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

-- A completed order's event starts a notification workflow (exactly once
-- per event, with $event bound).
SELECT df.subscribe('notify', 'order.completed',
	$w$INSERT INTO shop.notifications (order_id, event_id)
	   SELECT $event.payload::jsonb ->> 'order_id', $event.event_id::bigint$w$);
RESET ROLE;

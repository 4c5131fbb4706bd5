-- The workload of examples/ha/run: its tables, and the OrderProcessing-like
-- saga.  Run as a superuser on the primary; the workflows run as the role
-- app.  Every SQL step writes one row into ha.ledger and sleeps a little,
-- so the run is still under way when the primary is killed; an instance's
-- expected rows are written into ha.expected in the transaction that
-- starts it (ha.start), so both survive a failover or neither does.
\set ON_ERROR_STOP 1
CREATE ROLE app LOGIN;
SELECT df.grant_usage('app');
CREATE SCHEMA ha AUTHORIZATION app;
SET ROLE app;
CREATE TABLE ha.ledger (instance_id text NOT NULL, step text NOT NULL,
						at timestamptz NOT NULL DEFAULT clock_timestamp());
CREATE TABLE ha.expected (instance_id text NOT NULL, step text NOT NULL,
						  PRIMARY KEY (instance_id, step));
CREATE TABLE ha.probe (at timestamptz NOT NULL DEFAULT clock_timestamp());

-- a step that records its effect
CREATE FUNCTION ha.effect(step text, sleep float8 DEFAULT 0.05) RETURNS text
LANGUAGE sql IMMUTABLE AS $$
	SELECT format('INSERT INTO ha.ledger (instance_id, step) SELECT %L, %L FROM pg_sleep(%s)',
				  '{sys_instance_id}', step, sleep)
$$;

-- start a workflow and record the effects it must leave; key makes a
-- start sent again (after a lost connection) start nothing new
CREATE FUNCTION ha.start(graph text, label text, steps text[], key text) RETURNS text
LANGUAGE sql VOLATILE AS $$
	WITH s AS (SELECT df.start(graph, label, idempotency_key => key) AS id),
		 e AS (INSERT INTO ha.expected SELECT s.id, x FROM s, unnest(steps) x
			   ON CONFLICT DO NOTHING)
	SELECT id FROM s
$$;

-- a chain of n steps, and a fan-out of n branches followed by one step
CREATE FUNCTION ha.chain(n int) RETURNS text
LANGUAGE plpgsql IMMUTABLE AS $$
DECLARE
	g text := ha.effect('c1');
BEGIN
	FOR i IN 2 .. n LOOP
		g := df.seq(g, ha.effect('c' || i));
	END LOOP;
	RETURN g;
END
$$;
CREATE FUNCTION ha.fanout(n int) RETURNS text
LANGUAGE plpgsql IMMUTABLE AS $$
DECLARE
	g text := ha.effect('f1');
BEGIN
	FOR i IN 2 .. n LOOP
		g := df.join(g, ha.effect('f' || i));
	END LOOP;
	RETURN df.seq(g, ha.effect('f_end'));
END
$$;

-- An order as a saga, like examples/order_processing without its
-- services: reserve the stock, charge, ship, confirm; each forward step
-- paired with its undo (<~>).  A declined order fails at the shipment and
-- the saga releases and refunds.
CREATE FUNCTION ha.order_workflow(declined boolean) RETURNS text
LANGUAGE sql IMMUTABLE AS $$
	SELECT df.saga(df.seq(df.seq(df.seq(
		df.with_undo_op(ha.effect('reserve'), ha.effect('release')),
		df.with_undo_op(ha.effect('charge'), ha.effect('refund'))),
		CASE WHEN declined THEN 'SELECT 1 / 0 AS declined' ELSE ha.effect('ship') END),
		ha.effect('confirm')))
$$;
RESET ROLE;

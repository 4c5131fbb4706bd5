-- df.cancel of an instance that has ended (docs/guides/sagas.md and
-- docs/reference/functions.md, df.cancel): it is not cancelled and says
-- so; with compensate => true, an instance that failed with undos left,
-- or that a plain df.cancel ended, runs its registered undos; after a
-- plain df.cancel, df.compensate runs them.
SET ROLE df_user;
CREATE TABLE ce_log (what text);
CREATE TABLE ce_gate (open boolean);
INSERT INTO ce_gate VALUES (false);
CREATE FUNCTION ce_gated(what text) RETURNS void LANGUAGE plpgsql AS $$
BEGIN
	IF NOT (SELECT open FROM ce_gate) THEN
		RAISE EXCEPTION 'gate closed for %', what USING ERRCODE = '22023';
	END IF;
	INSERT INTO ce_log VALUES (what);
END $$;

-- a completed instance is not cancelled, and stays completed
SELECT df.start('SELECT 1') AS id \gset
SELECT df.await_instance(:'id', 60);
SELECT replace(df.cancel(:'id'), :'id', '<id>') AS answer;
SELECT df.status(:'id');
SELECT count(*) AS cancel_events FROM df.history(:'id') WHERE kind = 'instance_cancelled';

-- a plain cancel leaves the undos registered; df.compensate runs them
SELECT df.start(('INSERT INTO ce_log VALUES (''reserve'')' <~> 'INSERT INTO ce_log VALUES (''release'')')
				~> df.wait_for_signal('never')) AS id \gset
SELECT wait_until(format('SELECT EXISTS (SELECT 1 FROM df.compensations(%L))', :'id'), 60);
SELECT replace(df.cancel(:'id'), :'id', '<id>') AS answer;
SELECT df.status(:'id'), (SELECT state FROM df.compensations(:'id')) AS undo;
SELECT replace(df.compensate(:'id'), :'id', '<id>') AS answer;
SELECT df.await_instance(:'id', 60);
SELECT what FROM ce_log ORDER BY what;
SELECT state FROM df.compensations(:'id');

-- the same with df.cancel(compensate => true) after a plain cancel
TRUNCATE ce_log;
SELECT df.start(('INSERT INTO ce_log VALUES (''reserve 2'')' <~> 'INSERT INTO ce_log VALUES (''release 2'')')
				~> df.wait_for_signal('never')) AS id \gset
SELECT wait_until(format('SELECT EXISTS (SELECT 1 FROM df.compensations(%L))', :'id'), 60);
SELECT replace(df.cancel(:'id'), :'id', '<id>') AS answer;
SELECT replace(df.cancel(:'id', compensate => true), :'id', '<id>') AS answer;
SELECT df.await_instance(:'id', 60);
SELECT what FROM ce_log ORDER BY what;

-- a failed instance whose undo failed, with one left registered:
-- df.cancel(compensate => true) runs them once the cause is fixed
TRUNCATE ce_log;
SELECT df.start(('SELECT 1 AS a' <~> 'INSERT INTO ce_log VALUES (''undo a'')')
				~> ('SELECT 2 AS b' <~> 'SELECT ce_gated(''undo b'')')
				~> 'SELECT 1/0') AS id \gset
SELECT df.await_instance(:'id', 60);
SELECT state FROM df.compensations(:'id') ORDER BY state;
SELECT replace(df.cancel(:'id'), :'id', '<id>') AS answer;
UPDATE ce_gate SET open = true;
SELECT replace(df.cancel(:'id', compensate => true), :'id', '<id>') AS answer;
SELECT df.await_instance(:'id', 60);
SELECT what FROM ce_log ORDER BY what;

-- nothing left to undo: not cancelled, nothing runs
SELECT replace(df.cancel(:'id', compensate => true), :'id', '<id>') AS answer;
SELECT df.status(:'id');

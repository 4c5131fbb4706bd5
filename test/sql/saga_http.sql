-- Sagas with HTTP undos against the local test server: a charge
-- is refunded after the shipment failed.  The refund fails once with 503
-- and is retried by the undo default (df.compensations counts both
-- attempts); both of its calls carry one Idempotency-Key, its own, not the
-- charge's.
SELECT df.grant_usage('df_user', include_http => true) IS NOT NULL AS granted;
SET ROLE df_user;
SELECT df.setvar('base', current_setting('pgd_test.http_base'));
CREATE FUNCTION sh_wait(iid text) RETURNS text LANGUAGE plpgsql AS $$
BEGIN
	RETURN df.await_instance(iid, 60);
END $$;

SELECT df.start((df.http('{base}/flaky/charge_{sys_instance_id}/0/200', 'POST', '{"amount": 10}')
				 <~> df.http('{base}/flaky/refund_{sys_instance_id}/1/503', 'POST', '{"amount": 10}'))
				~> df.http('{base}/status/500', 'POST', '{"ship": true}')) AS id \gset
SELECT sh_wait(:'id');
SELECT state, attempts FROM df.compensations(:'id');
SELECT count(*) AS retries FROM df.history(:'id') WHERE kind = 'retry_scheduled';

-- the server's log: the charge once, the refund twice under one key of its own
SELECT df.start(df.http('{base}/log?path=/flaky/', 'GET')) AS log_id \gset
SELECT sh_wait(:'log_id');
WITH calls AS (
	SELECT e->>'path' AS path, e->>'key' AS key, e->>'method' AS method
	FROM df.nodes, jsonb_array_elements((result->>'body')::jsonb) e
	WHERE instance_id = :'log_id' AND (e->>'path' LIKE '%' || :'id' || '%'))
SELECT (SELECT count(*) FROM calls WHERE path LIKE '/flaky/charge_%') AS charges,
	   (SELECT count(*) FROM calls WHERE path LIKE '/flaky/refund_%') AS refunds,
	   (SELECT count(DISTINCT key) FROM calls WHERE path LIKE '/flaky/refund_%') AS refund_keys,
	   (SELECT bool_and(key IS NOT NULL) FROM calls) AS keyed,
	   (SELECT count(*) FROM calls c, calls r WHERE c.path LIKE '/flaky/charge_%'
		AND r.path LIKE '/flaky/refund_%' AND c.key = r.key) AS shared_keys;

SELECT df.clearvars() IS NOT NULL AS cleared;
RESET ROLE;

-- The HTTP destination policy and limits: superuser-only settings that the
-- HTTP worker applies (PGC_SIGHUP).  Each case changes them with ALTER
-- SYSTEM and a reload, then waits (with a deadline) until the worker says
-- it runs with them (df_internal.http_worker_settings()).
SELECT df.grant_usage('df_user', include_http => true);
CREATE PROCEDURE http_settings_wait(want text) LANGUAGE plpgsql AS $$
DECLARE
	deadline timestamptz := clock_timestamp() + interval '30 seconds';
BEGIN
	WHILE NOT (' ' || df_internal.http_worker_settings() || ' ') LIKE ('% ' || want || ' %') LOOP
		IF clock_timestamp() > deadline THEN
			RAISE EXCEPTION 'the HTTP worker did not apply % (it runs with %)', want, df_internal.http_worker_settings();
		END IF;
		PERFORM pg_sleep(0.02);
	END LOOP;
END
$$;
-- the outcome of a one-step workflow, masked
CREATE FUNCTION http_outcome(iid text) RETURNS text LANGUAGE plpgsql AS $$
DECLARE
	st text := df.await_instance(iid);
BEGIN
	RETURN (SELECT st || ': ' || regexp_replace(
		CASE WHEN jsonb_typeof(n.result) = 'object' THEN 'status ' || (n.result->>'status') ELSE n.result #>> '{}' END,
		':[0-9]{2,5}/', ':PORT/', 'g')
	FROM df.instances i JOIN df.nodes n ON n.instance_id = i.id AND n.id = i.root_node WHERE i.id = iid);
END
$$;
GRANT EXECUTE ON FUNCTION http_outcome(text) TO df_user;
SELECT split_part(current_setting('pgd_test.http_base'), ':', 3) AS port \gset
SET ROLE df_user;
SELECT df.setvar('base', current_setting('pgd_test.http_base'));
RESET ROLE;

-- the settings are the server's: a session can neither change nor (unless
-- superuser) read them, and only a superuser sees what the worker applies
SET ROLE df_user;
SET pg_durable.http_allow_private = on;
SHOW pg_durable.http_allowed_hosts;
SELECT df_internal.http_worker_settings();
RESET ROLE;
SELECT df_internal.http_worker_settings() LIKE 'allowed_hosts= allow_private=on %' AS regress_defaults;

-- private and loopback addresses are refused unless allowed; a connection
-- made before the change is not reused after it
SET ROLE df_user;
SELECT df.start(df.http('{base}/echo', 'GET', NULL, NULL, 30)) AS id \gset
SELECT http_outcome(:'id');
RESET ROLE;
ALTER SYSTEM SET pg_durable.http_allow_private = 'off';
SELECT pg_reload_conf();
CALL http_settings_wait('allow_private=off');
SET ROLE df_user;
SELECT df.start(df.http('{base}/echo', 'GET', NULL, NULL, 30)) AS id \gset
SELECT http_outcome(:'id');
RESET ROLE;
ALTER SYSTEM SET pg_durable.http_allow_private = 'on';
SELECT pg_reload_conf();
CALL http_settings_wait('allow_private=on');

-- the allow-list: a host, its subdomains, ".suffix" for subdomains only
ALTER SYSTEM SET pg_durable.http_allowed_hosts = 'svc.localhost, .only-sub.localhost';
SELECT pg_reload_conf();
CALL http_settings_wait('allowed_hosts=svc.localhost, .only-sub.localhost');
SET ROLE df_user;
SELECT df.start(df.http('{base}/echo', 'GET', NULL, NULL, 30)) AS id \gset
SELECT http_outcome(:'id');
SELECT df.start(df.http('http://svc.localhost:' || :'port' || '/status/200', 'GET')) AS id \gset
SELECT http_outcome(:'id');
SELECT df.start(df.http('http://api.SVC.localhost:' || :'port' || '/status/200', 'GET')) AS id \gset
SELECT http_outcome(:'id');
SELECT df.start(df.http('http://evilsvc.localhost:' || :'port' || '/status/200', 'GET')) AS id \gset
SELECT http_outcome(:'id');
SELECT df.start(df.http('http://only-sub.localhost:' || :'port' || '/status/200', 'GET')) AS id \gset
SELECT http_outcome(:'id');
SELECT df.start(df.http('http://x.only-sub.localhost:' || :'port' || '/status/200', 'GET')) AS id \gset
SELECT http_outcome(:'id');
RESET ROLE;
ALTER SYSTEM SET pg_durable.http_allowed_hosts = 'LOCALHOST';
SELECT pg_reload_conf();
CALL http_settings_wait('allowed_hosts=LOCALHOST');
SET ROLE df_user;
SELECT df.start(df.http('{base}/echo', 'GET', NULL, NULL, 30)) AS id \gset
SELECT http_outcome(:'id');
-- bare IP addresses: refused unless listed as such
SELECT df.start(df.http('http://127.0.0.1:' || :'port' || '/echo', 'GET', NULL, NULL, 30)) AS id \gset
SELECT http_outcome(:'id');
SELECT df.start(df.http('http://[::1]:' || :'port' || '/echo', 'GET', NULL, NULL, 30)) AS id \gset
SELECT http_outcome(:'id');
SELECT df.start(df.http('http://2130706433:' || :'port' || '/echo', 'GET', NULL, NULL, 30)) AS id \gset
SELECT http_outcome(:'id');
RESET ROLE;
ALTER SYSTEM SET pg_durable.http_allowed_hosts = '127.0.0.1';
SELECT pg_reload_conf();
CALL http_settings_wait('allowed_hosts=127.0.0.1');
SET ROLE df_user;
SELECT df.start(df.http('http://127.0.0.1:' || :'port' || '/echo', 'GET', NULL, NULL, 30)) AS id \gset
SELECT http_outcome(:'id');
SELECT df.start(df.http('{base}/echo', 'GET', NULL, NULL, 30)) AS id \gset
SELECT http_outcome(:'id');
RESET ROLE;
ALTER SYSTEM RESET pg_durable.http_allowed_hosts;
SELECT pg_reload_conf();
CALL http_settings_wait('allowed_hosts= allow_private=on');

-- size caps and the timeout ceiling
ALTER SYSTEM SET pg_durable.http_max_response_body = '1000';
SELECT pg_reload_conf();
CALL http_settings_wait('max_response_body=1000');
SET ROLE df_user;
SELECT df.start(df.http('{base}/bytes/1000', 'GET', NULL, NULL, 30)) AS id \gset
SELECT http_outcome(:'id');
SELECT df.start(df.http('{base}/bytes/1001', 'GET', NULL, NULL, 30)) AS id \gset
SELECT http_outcome(:'id');
RESET ROLE;
ALTER SYSTEM RESET pg_durable.http_max_response_body;
SELECT pg_reload_conf();
CALL http_settings_wait('max_response_body=10485760');
ALTER SYSTEM SET pg_durable.http_max_request_body = '100';
SELECT pg_reload_conf();
CALL http_settings_wait('max_request_body=100');
SET ROLE df_user;
SELECT df.start(df.http('{base}/echo', 'POST', repeat('x', 100), NULL, 30)) AS id \gset
SELECT http_outcome(:'id');
SELECT df.start(df.http('{base}/echo', 'POST', repeat('x', 101), NULL, 30)) AS id \gset
SELECT http_outcome(:'id');
RESET ROLE;
ALTER SYSTEM RESET pg_durable.http_max_request_body;
SELECT pg_reload_conf();
CALL http_settings_wait('max_request_body=10485760');
ALTER SYSTEM SET pg_durable.http_max_timeout = '10';
SELECT pg_reload_conf();
CALL http_settings_wait('max_timeout=10');
SET ROLE df_user;
SELECT df.start(df.http('{base}/echo', 'GET', NULL, NULL, 10)) AS id \gset
SELECT http_outcome(:'id');
SELECT df.start(df.http('{base}/echo', 'GET', NULL, NULL, 11)) AS id \gset
SELECT http_outcome(:'id');
RESET ROLE;
ALTER SYSTEM RESET pg_durable.http_max_timeout;
SELECT pg_reload_conf();
CALL http_settings_wait('max_timeout=300');

-- back to the configuration file's values
SELECT df_internal.http_worker_settings();
SET ROLE df_user;
SELECT df.clearvars();
RESET ROLE;
SELECT df.clearvars();
SELECT engine_idle();

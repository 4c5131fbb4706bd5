-- Installation: schemas, settings, information functions, wrong database.
-- (the harness created the extension in this database)
SELECT extname, extversion, extnamespace::regnamespace FROM pg_extension WHERE extname = 'pg_durable';

SELECT nspname FROM pg_namespace WHERE nspname IN ('df', 'df_internal') ORDER BY 1;
SELECT df.duroxide_schema();
SELECT df.target_database();
SELECT df.version() ~ '^[0-9]+\.[0-9]+\.[0-9]+ \(built .+\)$' AS version_ok;

-- every setting of the reference, with its default
SELECT name, setting, unit, context, vartype, min_val, max_val
FROM pg_settings WHERE name LIKE 'pg_durable.%' ORDER BY name;

-- the prefix is reserved: unknown pg_durable.* settings are refused
SET pg_durable.no_such_setting = 1;

-- list_instances_max_limit is the only one a superuser may change in a session
SET pg_durable.list_instances_max_limit = 5;
SHOW pg_durable.list_instances_max_limit;
RESET pg_durable.list_instances_max_limit;
SET pg_durable.workers = 2;

-- operators live in pg_catalog and work whatever the search_path
SELECT oprname, oprleft::regtype, oprright::regtype, oprcode
FROM pg_operator
WHERE oprnamespace = 'pg_catalog'::regnamespace
  AND oprcode::text LIKE 'df.%' ORDER BY oprname;

-- nothing is granted to PUBLIC on df; df_internal only gives USAGE, for the
-- readiness table that clients poll (df_internal._worker_ready) and for the
-- worker grants df.tasks' policy reads as the caller (each role sees its
-- own rows: row-level security)
SELECT nspname, nspacl IS NULL OR NOT aclcontains(nspacl, makeaclitem(0, nspowner, 'USAGE', false)) AS no_public_usage
FROM pg_namespace WHERE nspname IN ('df', 'df_internal') ORDER BY 1;
SELECT c.oid::regclass AS public_can_select
FROM pg_class c
WHERE c.relnamespace IN ('df'::regnamespace, 'df_internal'::regnamespace)
  AND c.relkind = 'r' AND has_table_privilege('public', c.oid, 'SELECT')
ORDER BY 1;

-- a second CREATE EXTENSION is refused
CREATE EXTENSION pg_durable;

-- another database is refused with the reference's message
CREATE DATABASE pgd_other;
\c pgd_other
\set VERBOSITY terse
CREATE EXTENSION pg_durable;
\set VERBOSITY default
\c regression
DROP DATABASE pgd_other;

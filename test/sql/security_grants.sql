-- Security: what the install script grants, the search_path of its SQL
-- functions, and df.grant_usage / df.revoke_usage with delegation, as
-- several roles (names with upper case, spaces and quotes).

-- Nothing is granted to PUBLIC but the readiness table (and the schema that
-- holds it), the two views of the circuit breakers (they hold no
-- instance data), df.locks (which shows each role the entries of its own
-- instances) and ordinary df functions: schema USAGE on df is the gate.
SELECT CASE c.classid WHEN 'pg_class'::regclass THEN 'relation ' || c.objid::regclass::text
                      WHEN 'pg_namespace'::regclass THEN 'schema ' || c.objid::regnamespace::text
                      WHEN 'pg_type'::regclass THEN 'type ' || c.objid::regtype::text
                      ELSE c.classid::regclass::text || ' ' || c.objid END AS object,
       a.privilege_type
FROM (SELECT d.classid, d.objid FROM pg_depend d
      WHERE d.refclassid = 'pg_extension'::regclass AND d.deptype = 'e'
        AND d.refobjid = (SELECT oid FROM pg_extension WHERE extname = 'pg_durable')
        AND d.classid <> 'pg_proc'::regclass) c
CROSS JOIN LATERAL (
    SELECT (aclexplode(acl)).* FROM (
        SELECT relacl AS acl FROM pg_class WHERE c.classid = 'pg_class'::regclass AND oid = c.objid
        UNION ALL SELECT nspacl FROM pg_namespace WHERE c.classid = 'pg_namespace'::regclass AND oid = c.objid
        UNION ALL SELECT typacl FROM pg_type WHERE c.classid = 'pg_type'::regclass AND oid = c.objid) x
    WHERE acl IS NOT NULL) a
WHERE a.grantee = 0
ORDER BY 1, 2;
-- column privileges for PUBLIC: none
SELECT count(*) AS public_column_grants
FROM pg_attribute at, LATERAL aclexplode(at.attacl) a
WHERE at.attrelid IN ('df.instances'::regclass, 'df.nodes'::regclass, 'df.vars'::regclass)
  AND a.grantee = 0;
-- the functions PUBLIC cannot execute (every other one it can, behind the schema gate)
SELECT p.oid::regprocedure AS not_executable_by_public
FROM pg_proc p JOIN pg_depend d ON d.classid = 'pg_proc'::regclass AND d.objid = p.oid
WHERE d.refclassid = 'pg_extension'::regclass AND d.deptype = 'e'
  AND d.refobjid = (SELECT oid FROM pg_extension WHERE extname = 'pg_durable')
  AND NOT EXISTS (SELECT 1 FROM aclexplode(coalesce(p.proacl, acldefault('f', p.proowner))) a
                  WHERE a.grantee = 0 AND a.privilege_type = 'EXECUTE')
ORDER BY 1::text;
-- nor anything in the private schema but reading the readiness table,
-- the row checks of df.instances, df.nodes and the events (a CHECK runs with the rights
-- of whoever writes the row: df.start writes nodes as its caller) and the standby check
-- of the writing functions in PL/pgSQL, which run as their caller
SELECT p.oid::regprocedure AS public_in_df_internal
FROM pg_proc p
WHERE p.pronamespace = 'df_internal'::regnamespace
  AND EXISTS (SELECT 1 FROM aclexplode(coalesce(p.proacl, acldefault('f', p.proowner))) a
              WHERE a.grantee = 0)
ORDER BY 1::text;

-- every SQL or PL/pgSQL function of the extension pins its search_path
SELECT count(*) AS sql_and_plpgsql_functions,
       count(*) FILTER (WHERE NOT coalesce(p.proconfig @> '{"search_path=pg_catalog, pg_temp"}', false)) AS without_safe_search_path
FROM pg_proc p JOIN pg_depend d ON d.classid = 'pg_proc'::regclass AND d.objid = p.oid
WHERE d.refclassid = 'pg_extension'::regclass AND d.deptype = 'e'
  AND d.refobjid = (SELECT oid FROM pg_extension WHERE extname = 'pg_durable')
  AND p.prolang IN (SELECT oid FROM pg_language WHERE lanname IN ('sql', 'plpgsql'));
-- the functions with a pinned search_path: those in SQL and PL/pgSQL, and the
-- C functions that act with the bootstrap superuser's privileges
SELECT p.oid::regprocedure, l.lanname, p.prosecdef, p.proconfig
FROM pg_proc p JOIN pg_language l ON l.oid = p.prolang
JOIN pg_depend d ON d.classid = 'pg_proc'::regclass AND d.objid = p.oid
WHERE d.refclassid = 'pg_extension'::regclass AND d.deptype = 'e'
  AND d.refobjid = (SELECT oid FROM pg_extension WHERE extname = 'pg_durable')
  AND p.proconfig IS NOT NULL
ORDER BY 1::text;

-- the privileges a role holds on pg_durable's objects, one line each
CREATE FUNCTION df_privs(r text) RETURNS SETOF text LANGUAGE sql AS $$
    SELECT 'schema df: ' || a.privilege_type || CASE WHEN a.is_grantable THEN ' (grantable)' ELSE '' END
    FROM pg_namespace n, aclexplode(n.nspacl) a
    WHERE n.nspname = 'df' AND a.grantee = quote_ident(r)::regrole
    UNION ALL
    SELECT c.oid::regclass || ': ' || a.privilege_type || CASE WHEN a.is_grantable THEN ' (grantable)' ELSE '' END
    FROM pg_class c, aclexplode(c.relacl) a
    WHERE c.relnamespace = 'df'::regnamespace AND a.grantee = quote_ident(r)::regrole
    UNION ALL
    SELECT c.oid::regclass || '.' || at.attname || ': ' || a.privilege_type
           || CASE WHEN a.is_grantable THEN ' (grantable)' ELSE '' END
    FROM pg_class c JOIN pg_attribute at ON at.attrelid = c.oid, aclexplode(at.attacl) a
    WHERE c.relnamespace = 'df'::regnamespace AND a.grantee = quote_ident(r)::regrole
    UNION ALL
    SELECT p.oid::regprocedure || ': ' || a.privilege_type || CASE WHEN a.is_grantable THEN ' (grantable)' ELSE '' END
    FROM pg_proc p, aclexplode(p.proacl) a
    WHERE p.pronamespace = 'df'::regnamespace AND a.grantee = quote_ident(r)::regrole
    ORDER BY 1
$$;

-- run a statement, report its error with an instance id hidden
CREATE FUNCTION sec_try(q text, hide text) RETURNS text LANGUAGE plpgsql AS $$
BEGIN
	EXECUTE q;
	RETURN 'ok';
EXCEPTION WHEN OTHERS THEN
	RETURN replace(SQLERRM, hide, '<id>');
END
$$;

CREATE ROLE sec_root SUPERUSER;
CREATE ROLE "Sec Admin" LOGIN;
CREATE ROLE "sec user" LOGIN;
CREATE ROLE "sec""quote" LOGIN;
CREATE ROLE sec_plain LOGIN;

-- not granted: the schema is the gate
SET ROLE sec_plain;
SELECT df.start('SELECT 1');
SELECT df.status('00000000');
SELECT df.grant_usage('sec_plain');
RESET ROLE;

-- a plain grant: the reference's exact set
SELECT df.grant_usage('sec user');
SELECT * FROM df_privs('sec user');
-- include_http adds the two HTTP builders
SELECT df.grant_usage('sec"quote', include_http => true);
SELECT * FROM df_privs('sec"quote');
-- with_grant: everything WITH GRANT OPTION, plus the helpers and df.metrics
SELECT df.grant_usage('Sec Admin', with_grant => true);
SELECT * FROM df_privs('Sec Admin');
-- bad role names
SELECT df.grant_usage(NULL);
SELECT df.grant_usage('no such role');

-- the granted roles work, each seeing only its own instances
SET ROLE "sec user";
SELECT df.start('SELECT current_user AS who', 'sec-grants') AS id_user \gset
RESET ROLE;
SET ROLE "sec""quote";
SELECT df.start('SELECT current_user AS who', 'sec-grants') AS id_quote \gset
SELECT df.await_instance(:'id_quote');
SELECT df.result(:'id_quote');
SELECT df.status(:'id_user') AS other_users_status;
SELECT sec_try(format('SELECT df.signal(%L, %L)', :'id_user', 'x'), :'id_user') AS signal_other;
SELECT sec_try(format('SELECT df.cancel(%L)', :'id_user'), :'id_user') AS cancel_other;
SELECT count(*) AS visible FROM df.instances WHERE label = 'sec-grants';
-- HTTP builders: granted to "sec""quote" only
SELECT df.http('http://example.invalid/') IS NOT NULL AS http_allowed;
SELECT df.metrics();
RESET ROLE;
SET ROLE "sec user";
SELECT df.await_instance(:'id_user');
SELECT df.result(:'id_user');
SELECT df.http('http://example.invalid/');
SELECT df.metrics();
-- direct writes: only status and updated_at of its own rows
UPDATE df.instances SET submitted_by = '"sec""quote"' WHERE id = :'id_user';
DELETE FROM df.instances WHERE id = :'id_user';
INSERT INTO df.instances (id, root_node, submitted_by, status) VALUES ('0000000a', '0000000b', '"sec user"', 'running');
INSERT INTO df.instances (id, root_node, submitted_by) VALUES ('0000000a', '0000000b', '"sec""quote"');
UPDATE df.instances SET updated_at = now() WHERE id IN (:'id_user', :'id_quote')
RETURNING id = :'id_user' AS own_row_only;
SELECT df.grant_usage('sec_plain');
RESET ROLE;

-- delegation: "Sec Admin" passes usage on, but not HTTP, which it lacks
SET ROLE "Sec Admin";
SELECT df.grant_usage('sec_plain');
SELECT * FROM df_privs('sec_plain');
SELECT df.grant_usage('sec_plain', include_http => true);
SELECT count(*) AS metrics_rows FROM df.metrics();
RESET ROLE;
-- a role that may run the helper but holds nothing WITH GRANT OPTION
GRANT EXECUTE ON FUNCTION df.grant_usage(text, boolean, boolean), df.revoke_usage(text) TO "sec user";
SET ROLE "sec user";
SELECT df.grant_usage('sec_plain');
SELECT df.revoke_usage('sec_plain');
RESET ROLE;
REVOKE EXECUTE ON FUNCTION df.grant_usage(text, boolean, boolean), df.revoke_usage(text) FROM "sec user";

-- revoke by the delegate removes its grants only; self-revoke is harmless
SET ROLE "Sec Admin";
SELECT df.revoke_usage('Sec Admin');
SELECT count(*) AS admin_privileges_left FROM df_privs('Sec Admin');
SELECT df.revoke_usage('sec_plain');
SELECT * FROM df_privs('sec_plain');
SELECT df.grant_usage('sec_plain');
RESET ROLE;
SET ROLE sec_plain;
SELECT df.status('00000000') AS usage_again;
RESET ROLE;
-- revoking the delegate cascades to what it granted
SET ROLE sec_root;
SELECT df.revoke_usage('Sec Admin');
SELECT * FROM df_privs('Sec Admin');
SELECT * FROM df_privs('sec_plain');
SET ROLE sec_plain;
SELECT df.status('00000000');
SET ROLE sec_root;
-- any superuser revokes what a superuser granted
SELECT df.revoke_usage('sec"quote');
SELECT * FROM df_privs('sec"quote');
-- additive: granting again keeps what was granted
SELECT df.grant_usage('sec user', include_http => true);
SELECT df.grant_usage('sec user');
SELECT count(*) AS http_still_granted FROM df_privs('sec user') WHERE df_privs LIKE 'df.http%';
SELECT df.revoke_usage('sec user');
SELECT count(*) AS sec_user_privileges_left FROM df_privs('sec user');
RESET ROLE;

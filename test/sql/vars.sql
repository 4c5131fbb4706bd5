-- Workflow variables: per-role namespace, upsert, refusal inside a workflow,
-- and detection of helper results passed into composers.

SELECT df.setvar('region', 'eu');
SELECT df.getvar('region');
SELECT df.setvar('region', 'us');   -- upsert
SELECT df.getvar('region');
SELECT df.getvar('missing') IS NULL AS missing_is_null;
SELECT df.setvar('empty', '');
SELECT df.getvar('empty') = '' AS empty_kept;
SELECT df.setvar('', 'x');
SELECT df.setvar('n', NULL);        -- STRICT: NULL in, NULL out, nothing stored
SELECT count(*) FROM df.vars WHERE name = 'n';
SELECT name, value, owner = current_user::regrole AS own FROM df.vars ORDER BY name;
SELECT df.unsetvar('region');
SELECT df.getvar('region') IS NULL AS unset;
SELECT df.unsetvar('never-set');    -- harmless

-- roles have separate namespaces (RLS plus an explicit owner filter)
CREATE ROLE "var User" LOGIN;
GRANT USAGE ON SCHEMA df TO "var User";
GRANT SELECT, INSERT, UPDATE, DELETE ON df.vars TO "var User";
SET ROLE "var User";
SELECT df.getvar('empty') IS NULL AS not_visible;
SELECT df.setvar('empty', 'mine');
SELECT df.getvar('empty');
SELECT count(*) FROM df.vars;
SELECT df.clearvars();
SELECT count(*) FROM df.vars;
RESET ROLE;
SELECT df.getvar('empty') = '' AS superuser_value_untouched;
SELECT df.clearvars();
SELECT count(*) FROM df.vars;

-- refused inside a workflow
SET df.in_workflow = 'true';
SELECT df.setvar('a', 'b');
SELECT df.unsetvar('a');
SELECT df.clearvars();
SELECT df.getvar('a') IS NULL AS getvar_allowed;
RESET df.in_workflow;

DROP OWNED BY "var User";
DROP ROLE "var User";

-- a helper's result passed into a composer in the same statement is refused
SELECT df.seq(df.setvar('a', '1'), 'SELECT 1');
SELECT df.setvar('a', '1') ~> 'SELECT 1';
SELECT 'SELECT 1' & df.unsetvar('a');
SELECT df.join3('SELECT 1', 'SELECT 2', df.clearvars());
SELECT df.if(df.setvar('a', '1'), 'SELECT 1', 'SELECT 2');
-- in separate statements 'OK' is ordinary SQL text again
SELECT df.setvar('a', '1');
SELECT df.seq('OK', 'SELECT 1');
SELECT df.clearvars();

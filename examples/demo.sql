-- A workflow that fans out three SQL steps in parallel, joins them and
-- writes a summary.  Composing it is pure: nothing runs until df.start.
\pset format unaligned
\pset tuples_only on

CREATE TABLE IF NOT EXISTS demo_orders (region text, amount numeric);

\echo '-- the workflow as Durofut JSON:'
SELECT ('INSERT INTO demo_orders VALUES (''eu'', 10)'
        & 'INSERT INTO demo_orders VALUES (''us'', 20)'
        & 'INSERT INTO demo_orders VALUES (''ap'', 30)')
       ~> ('SELECT sum(amount) AS total FROM demo_orders' |=> 'summary');

\echo ''
\echo '-- its plan (df.explain):'
SELECT df.explain(
  $$ ('INSERT INTO demo_orders VALUES (''eu'', 10)'
      & 'INSERT INTO demo_orders VALUES (''us'', 20)'
      & 'INSERT INTO demo_orders VALUES (''ap'', 30)')
     ~> ('SELECT sum(amount) AS total FROM demo_orders' |=> 'summary') $$);

# df.map over 1,000 rows while executors are SIGKILLed: the
# query runs once, every child runs exactly once, the result is the array
# of the children's results in row order, and df.check() is clean.
#
# The first kill hits the executor while it runs the MAP's query (its step
# sleeps until the test says otherwise), so the children are made by the
# query's second run; then the executors are killed twice while the
# children run, at most 100 at a time.
use strict;
use warnings;
use FindBin;
use lib "$FindBin::RealBin/../perl";
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use PgDurableTest;

my $ROLE = $PgDurableTest::ROLE;
my $ROWS = 1000;
my $node = engine_node('map_kill', 2);

map_kill_setup($node, 'at timestamptz NOT NULL DEFAULT clock_timestamp()');

my $id = $node->safe_psql('postgres', qq{SET ROLE $ROLE; SELECT df.start(df.map(
	'SELECT g + map_query_gate() AS n, pg_sleep(0) AS s FROM generate_series(1, $ROWS) g',
	'INSERT INTO map_effects (n) SELECT \$item.n FROM pg_sleep(0.01) RETURNING n * 2 AS v',
	max_concurrent => 100));});
like($id, qr/^[0-9a-f]{8}$/, 'the map started');

# 1. kill the executor running the query
my $pid = executor_pid_in_step($node, '%generate_series%');
$node->safe_psql('postgres', 'INSERT INTO killed VALUES (true)');
kill 'KILL', $pid;
ok(wait_executors_again($node, 2, $pid), 'the engine came back after the SIGKILL during the query');

# 2. and 3. kill executors while the children run
ok(query_until($node, 'SELECT count(*) >= 300 FROM map_effects'), '300 children ran');
kill_an_executor($node, 2, $ROWS, 'after 300 children');
ok(query_until($node, 'SELECT count(*) >= 650 FROM map_effects'), '650 children ran');
kill_an_executor($node, 2, $ROWS, 'after 650 children');

ok(query_until($node, "SELECT status = 'completed' FROM df.instances WHERE id = '$id'"),
	'the map completed')
  or diag_engine($node);

# map_query_gate() runs once per row of the query
is($node->safe_psql('postgres', 'SELECT count(*) FROM query_runs'), $ROWS,
	'the query\'s effects committed once (its killed run rolled back)');
is($node->safe_psql('postgres',
		"SELECT count(*) FROM df.nodes WHERE instance_id = '$id' AND node_type = 'SQL'"),
	$ROWS + 2, 'one copy of the step per row (plus the query and the template)');
is($node->safe_psql('postgres',
		"SELECT count(*) || ' ' || count(DISTINCT n) || ' ' || min(n) || ' ' || max(n) FROM map_effects"),
	"$ROWS $ROWS 1 $ROWS", 'every child ran exactly once');
is($node->safe_psql('postgres', qq{
SELECT jsonb_array_length(r) = $ROWS
   AND (SELECT bool_and((e -> 'rows' -> 0 ->> 'v')::int = 2 * o)
		FROM jsonb_array_elements(r) WITH ORDINALITY AS x(e, o))
FROM (SELECT df.result('$id')::jsonb AS r) s}),
	't', 'the result holds every child\'s result, in row order');
is($node->safe_psql('postgres',
		"SELECT count(*) FROM df_internal.maps"), '0', 'no MAP counters left');
is($node->safe_psql('postgres', 'SELECT count(*) FROM df.check()'), '0', 'df.check() is clean')
  or diag $node->safe_psql('postgres', 'SELECT * FROM df.check()');

done_testing();

# df.map in lanes mode over 100,000 rows while the engine crashes: the
# query's rows are written once (its killed run rolled back with the rows
# it had written), every row's step commits exactly once through two
# executor SIGKILLs and an immediate restart, the MAP returns the counts,
# no rows or counters are left and df.check() is clean.  Then the size
# limit of collected results: past pg_durable.max_result_size the MAP
# fails and says so.
use strict;
use warnings;
use FindBin;
use lib "$FindBin::RealBin/../perl";
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time);
use PgDurableTest;

my $ROLE = $PgDurableTest::ROLE;
my $ROWS = 100_000;
my $node = engine_node('map_lanes', 2);

map_kill_setup($node);

# the largest resident set of the executors running now, in kB
sub executors_peak_rss
{
	my $pids = $node->safe_psql('postgres',
		"SELECT string_agg(pid::text, ' ') FROM pg_stat_activity "
		  . "WHERE backend_type = 'pg_durable executor'");
	my $peak = 0;
	for my $pid (split / /, $pids)
	{
		open(my $f, '<', "/proc/$pid/status") or next;
		while (<$f>)
		{
			$peak = $1 if /^VmHWM:\s+(\d+)/ && $1 > $peak;
		}
		close $f;
	}
	return $peak;
}

my $t0 = time();
my $id = $node->safe_psql('postgres', qq{SET ROLE $ROLE; SELECT df.start(df.map(
	'SELECT g AS n, pg_sleep(0) AS s FROM generate_series(1, $ROWS) g
	 WHERE g < 50000 OR (CASE WHEN g = 50000 THEN map_query_gate() ELSE 0 END) = 0',
	'INSERT INTO map_effects (n) VALUES (\$item.n)',
	32, collect => false));});
like($id, qr/^[0-9a-f]{8}$/, 'the map started');

# 1. kill the executor running the query once it sleeps in the gate, having
# written 49 chunks of rows
ok(query_until($node, "SELECT count(*) = 1 FROM pg_stat_activity "
	  . "WHERE backend_type = 'pg_durable executor' AND wait_event = 'PgSleep'"),
	'the query reached row 50,000')
  or diag_engine($node);
my $pid = executor_pid_in_step($node, '%generate_series%');
$node->safe_psql('postgres', 'INSERT INTO killed VALUES (true)');
kill 'KILL', $pid;
ok(wait_executors_again($node, 2, $pid), 'the engine came back after the SIGKILL during the query');
ok(query_until($node, "SELECT count(*) = 1 FROM df.nodes WHERE instance_id = '$id' "
	  . "AND node_type = 'SQL' AND query LIKE '%generate_series%' AND status = 'completed'"),
	'the query ran again');
diag sprintf('the query completed %.1f s after the start', time() - $t0);

# 2. and 3. kill executors while the rows run; 4. an immediate restart
ok(query_until($node, 'SELECT count(*) >= 25000 FROM map_effects'), '25,000 rows ran');
kill_an_executor($node, 2, $ROWS, 'after 25,000 rows');
ok(query_until($node, 'SELECT count(*) >= 50000 FROM map_effects'), '50,000 rows ran');
kill_an_executor($node, 2, $ROWS, 'after 50,000 rows');
ok(query_until($node, 'SELECT count(*) >= 75000 FROM map_effects'), '75,000 rows ran');
is($node->safe_psql('postgres', "SELECT count(*) < $ROWS FROM map_effects"), 't',
	'rows are left to run at the restart');
$node->stop('immediate');
$node->start;
wait_engine_ready($node, 2);

ok(query_until($node, "SELECT status = 'completed' FROM df.instances WHERE id = '$id'"),
	'the map completed')
  or diag_engine($node);
my $secs = time() - $t0;
diag sprintf('%d rows in %.1f s (%.0f rows/s, crashes included); executors\' peak RSS since the restart %d kB',
	$ROWS, $secs, $ROWS / $secs, executors_peak_rss());

is($node->safe_psql('postgres', 'SELECT count(*) FROM query_runs'), '1',
	'the query\'s effects committed once (its killed run rolled back)');
is($node->safe_psql('postgres',
		"SELECT count(*) || ' ' || count(DISTINCT n) || ' ' || min(n) || ' ' || max(n) FROM map_effects"),
	"$ROWS $ROWS 1 $ROWS", 'every row\'s step ran exactly once');
is($node->safe_psql('postgres', "SELECT df.result('$id')::jsonb::text"),
	qq({"items": $ROWS, "failed": 0, "succeeded": $ROWS}), 'the MAP returned the counts');
is($node->safe_psql('postgres',
		"SELECT count(*) FROM df.nodes WHERE instance_id = '$id' AND node_type = 'SQL'"),
	34, 'one copy of the step per lane (plus the query and the template)');
is($node->safe_psql('postgres',
		'SELECT (SELECT count(*) FROM df_internal.maps) + (SELECT count(*) FROM df_internal.map_rows)'),
	'0', 'no MAP counters or rows left');
check_df_clean($node, 'the map of 100,000 rows');

# collected results past pg_durable.max_result_size fail the MAP, and say so
$node->safe_psql('postgres',
	"ALTER SYSTEM SET pg_durable.max_result_size = '1kB'; SELECT pg_reload_conf();");
ok(query_until($node, "SELECT current_setting('pg_durable.max_result_size') = '1kB'"),
	'the limit is 1kB');
$id = $node->safe_psql('postgres', qq{SET ROLE $ROLE; SELECT df.start(df.map(
	'SELECT g AS n FROM generate_series(1, 100) g', 'SELECT \$item.n AS n', 4, collect => true));});
ok(query_until($node, "SELECT status = 'failed' FROM df.instances WHERE id = '$id'"),
	'the map with too much to collect failed');
like($node->safe_psql('postgres',
		"SELECT result #>> '{}' FROM df.nodes WHERE instance_id = '$id' AND node_type = 'MAP'"),
	qr/^df\.map: the results of its 100 items are \d+ bytes, more than pg_durable\.max_result_size \(1 kB\); with collect => false/,
	'it says the limit and what to do');
check_df_clean($node, 'the failed map');

done_testing();

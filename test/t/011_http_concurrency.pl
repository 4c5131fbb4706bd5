# Many HTTP steps in flight without holding an executor each: 500 instances,
# each one HTTP step, call /barrier/500 on the test server, which answers
# none of them until 500 are waiting at the same time (after 90 s it answers
# 503, failing the steps).  Meanwhile one of the two executors runs a SQL step
# that only ends once the 500 instances have completed: SQL keeps running
# while the calls wait, and the calls do not need an executor.
use strict;
use warnings;
use FindBin;
use lib "$FindBin::RealBin/../perl";
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use PgDurableTest;

my $n = 500;
my $base = start_http_server();
my $node = engine_node('httpconc', 2, "pg_durable.http_allow_private = on\nmax_connections = 50\n");
$node->safe_psql('postgres', qq{
SELECT df.grant_usage('df_user', include_http => true);
-- a SQL step that waits until the HTTP instances have all completed
CREATE FUNCTION wait_for_http_instances(n int) RETURNS int LANGUAGE plpgsql AS \$\$
DECLARE
	deadline timestamptz := clock_timestamp() + interval '180 seconds';
	done int;
BEGIN
	LOOP
		SELECT count(*) INTO done FROM df.instances WHERE label = 'http' AND status = 'completed';
		EXIT WHEN done >= n OR clock_timestamp() > deadline;
		PERFORM pg_sleep(0.05);
	END LOOP;
	RETURN done;
END
\$\$;
GRANT EXECUTE ON FUNCTION wait_for_http_instances(int) TO df_user;
});

my $sql_id = $node->safe_psql('postgres',
	"SET ROLE df_user; SELECT df.start('SELECT wait_for_http_instances($n) AS done', 'sql');");
$node->poll_query_until('postgres',
	"SELECT count(*) = 1 FROM pg_stat_activity WHERE backend_type = 'pg_durable executor' "
	  . "AND query LIKE '%wait_for_http_instances%'")
  or die "the SQL step did not start";

$node->safe_psql('postgres',
	"SET ROLE df_user; SELECT count(df.start(df.http('$base/barrier/$n?t=90000', 'GET', NULL, NULL, 120), 'http')) "
	  . "FROM generate_series(1, $n);");

wait_instances_done($node, "$n HTTP instances and the SQL instance");
is( $node->safe_psql('postgres', q{
SELECT label, status, count(*) FROM df.instances GROUP BY 1, 2 ORDER BY 1, 2}),
	"http|completed|$n\nsql|completed|1",
	"the $n HTTP instances and the SQL instance completed");
is( $node->safe_psql('postgres', qq{
SELECT count(*) FROM df.nodes n JOIN df.instances i ON i.id = n.instance_id
WHERE i.label = 'http' AND n.result->>'status' = '200' AND n.result->>'body' = 'released'}),
	$n, "every call was released by the barrier: $n were in flight at once");
is($node->safe_psql('postgres', "SELECT df.result('$sql_id')::jsonb->'rows'->0->>'done'"),
	$n, 'the SQL step ran until the last HTTP instance had completed');
cmp_ok(http_get($base, '/stats')->{max_inflight}, '>=', $n, "the server saw $n requests at once");

check_engine_empty($node);
$node->stop('fast');
done_testing();

# An executor's cache of graphs stays bounded by the nodes it holds
# (src/engine/graph_cache.c, GRAPH_CACHE_MAX_NODES = 100,000): a fan-out of
# 5,000 branches is a graph of 9,999 nodes, about 3.5 MB in an executor's
# memory, and an executor kept the graph of every instance it had worked on
# until it had 2,000 of them.  After fourteen such instances (140,000
# nodes), each executor's memory contexts are written to the server log
# (pg_log_backend_memory_contexts) and its cached graphs of over a
# megabyte counted: at most eleven (100,000 nodes, and the one loaded
# last), where the executors that worked on all fourteen kept fourteen.
use strict;
use warnings;
use FindBin;
use lib "$FindBin::RealBin/../perl";
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use PgDurableTest;

my $ROLE = $PgDurableTest::ROLE;
my $BRANCHES = 5000;
my $INSTANCES = 14;
my $node = engine_node('graph_cache', 2);

# the balanced tree of & over $BRANCHES steps, as df.start takes it
$node->safe_psql('postgres', q{
CREATE FUNCTION fan(lo int, hi int) RETURNS text LANGUAGE plpgsql AS $$
BEGIN
	IF hi - lo = 1 THEN
		RETURN 'SELECT 1';
	END IF;
	RETURN fan(lo, (lo + hi) / 2) & fan((lo + hi) / 2, hi);
END
$$;
CREATE TABLE fan_graph AS SELECT fan(0, } . $BRANCHES . q{) AS g;
GRANT SELECT ON fan_graph TO } . $ROLE . q{;
});

for my $i (1 .. $INSTANCES)
{
	my $id = $node->safe_psql('postgres',
		"SET ROLE $ROLE; SELECT df.start(g) FROM fan_graph");
	my $status = $node->safe_psql('postgres',
		"SET ROLE $ROLE; SELECT df.await_instance('$id', 300)");
	is($status, 'completed', "fan-out $i of $BRANCHES branches completed")
	  or diag_engine($node);
}

# each executor's cached graphs, from its memory contexts in the log
my $pids = $node->safe_psql('postgres',
	"SELECT string_agg(pid::text, ' ') FROM pg_stat_activity "
	  . "WHERE backend_type = 'pg_durable executor'");
my @pids = split / /, $pids;
is(scalar(@pids), 2, 'two executors run');
my $offset = -s $node->logfile;
$node->safe_psql('postgres', "SELECT pg_log_backend_memory_contexts($_)")
  for @pids;
my %graphs;
my $written = 0;
my $deadline = time() + $PostgreSQL::Test::Utils::timeout_default;
while (time() < $deadline)
{
	my $log = slurp_file($node->logfile, $offset);
	my $done = 0;
	for my $pid (@pids)
	{
		$done++ if $log =~ /\[$pid\] LOG:\s+Grand total/;
		$graphs{$pid} = () = $log =~
		  /\[$pid\] LOG:\s+level: \d+; pg_durable graph: (?:\d{7,}) total/g;
	}
	$written = $done;
	last if $done == @pids;
	sleep 1;
}
is($written, 2, 'both executors wrote their memory contexts');
my $most = 0;
for my $pid (@pids)
{
	my $n = $graphs{$pid} // 0;
	$most = $n if $n > $most;
	cmp_ok($n, '<=', 11,
		"executor $pid keeps at most 100,000 nodes of graphs past a transaction ($n graphs of $BRANCHES branches)"
	);
}
cmp_ok($most, '>=', 1, 'an executor keeps the graph of a wide instance it worked on');
check_df_clean($node, 'the wide fan-outs');

$node->stop;
done_testing();

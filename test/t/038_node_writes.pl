# A node write reads only the node it writes (engine/store_nodes.c), whatever
# the statistics its plan was made with.  Here they say that an instance
# has three nodes (the ANALYZE autovacuum takes after the first small
# workflows of a new installation; autovacuum is off so that nothing
# else makes the executors plan again), and then comes a wide fan-out.
#
# One fan-out of 2,000 branches (a balanced tree of df.join, 3,999 nodes)
# writes every node twice, in groups of two to eight writes per statement.
# A group that named its nodes by an IN list let such a plan search the
# primary key by the instance alone and filter by the list, reading the
# instance's nodes for each write: 172 buffer hits per write in the groups
# of three here, 2,100 in bench/run's 1,000-branch fan-out, quadratic in
# the width.  By the whole primary key it is about 20 (the UPDATE, its
# event and the old row's updated_at).
use strict;
use warnings;
use FindBin;
use lib "$FindBin::RealBin/../perl";
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use PgDurableTest;

my $ROLE = $PgDurableTest::ROLE;
my $BRANCHES = 2000;
my $MAX_HITS = 60;    # buffer hits per node write: about 20 by the key
my $node = engine_node('node_writes', 4, qq{
shared_preload_libraries = 'pg_durable,pg_stat_statements'
pg_stat_statements.track = all
autovacuum = off
});

sub tree
{
	my ($lo, $hi) = @_;
	return "'SELECT $lo'" if $hi - $lo == 1;
	my $mid = int(($lo + $hi) / 2);
	return 'df.join(' . tree($lo, $mid) . ', ' . tree($mid, $hi) . ')';
}

$node->safe_psql('postgres', qq{
CREATE EXTENSION pg_stat_statements;
CREATE TABLE graph AS SELECT (} . tree(0, $BRANCHES) . qq{)::text AS g;
GRANT SELECT ON graph TO $ROLE;
});
# small workflows first, then the statistics autovacuum would take of
# them: a few nodes per instance
$node->safe_psql('postgres', qq{
SET ROLE $ROLE;
DO \$\$
DECLARE
	id text;
BEGIN
	FOR i IN 1..40 LOOP
		id := df.start(df.join('SELECT 1', 'SELECT 2'));
		COMMIT;
		PERFORM df.await_instance(id, 60);
	END LOOP;
END
\$\$;
});
$node->safe_psql('postgres', 'ANALYZE df.nodes');
ok($node->safe_psql('postgres',
		"SELECT n_distinct FROM pg_stats WHERE schemaname = 'df' AND tablename = 'nodes' "
		  . "AND attname = 'instance_id'") != 0,
	'df.nodes has statistics of small instances');

$node->safe_psql('postgres', 'SELECT pg_stat_statements_reset()');
my $id = $node->safe_psql('postgres',
	"SET ROLE $ROLE; SELECT df.start((SELECT g FROM graph))");
like($id, qr/^[0-9a-f]{8}$/, 'the fan-out started');
is($node->safe_psql('postgres',
		"SET ROLE $ROLE; SELECT df.await_instance('$id', 300)"),
	'completed', "the $BRANCHES-branch fan-out completed")
  or diag_engine($node);
is($node->safe_psql('postgres',
		"SELECT count(*) FILTER (WHERE status = 'completed') || '/' || count(*) "
		  . "FROM df.nodes WHERE instance_id = '$id'"),
	(2 * $BRANCHES - 1) . '/' . (2 * $BRANCHES - 1), 'every node completed');

# the statements that write nodes with their events, one per group size:
# their rows (one per write) and buffer hits
my $stats = $node->safe_psql('postgres', q{
SELECT sum(rows) || '|' || sum(calls) || '|'
       || max(shared_blks_hit::numeric / rows) FILTER (WHERE calls >= 10)
FROM pg_stat_statements
WHERE query LIKE '%UPDATE df.nodes%' AND query LIKE '%INSERT INTO df_internal.events%'
  AND rows > 0});
my ($writes, $calls, $worst) = split /\|/, $stats;
ok($writes >= 2 * (2 * $BRANCHES - 1),
	"the node writes were counted ($writes writes in $calls statements)");
cmp_ok($worst // 1e9, '<', $MAX_HITS,
	sprintf('a node write reads only its node (at most %.1f buffer hits per write)', $worst // -1))
  or diag($node->safe_psql('postgres', q{
SELECT calls, rows, shared_blks_hit, substr(query, 1, 60) FROM pg_stat_statements
WHERE query LIKE '%UPDATE df.nodes%' AND query LIKE '%INSERT INTO df_internal.events%'}));

is($node->safe_psql('postgres', 'SELECT count(*) FROM df.check()'), '0', 'df.check() is clean');

done_testing();

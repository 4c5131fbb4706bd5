# Retention keeps at most 10,000 finished instances even when none is old
# enough to expire (retention_days = 30): with 10,050 recent finished
# instances, the 50 oldest are removed, the newest 10,000 and a live
# instance stay.
use strict;
use warnings;
use FindBin;
use lib "$FindBin::RealBin/../perl";
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use PgDurableTest;

my $node = engine_node('retention_cap', 2,
	"pg_durable.retention_days = 30\npg_durable.reconcile_interval = 1\n");

my $live = start_instance($node,
	"df.wait_for_signal('go') ~> 'INSERT INTO effects (instance_id, step) VALUES (''{sys_instance_id}'', ''live'')'",
	'live');
$node->poll_query_until('postgres',
	"SELECT status = 'running' FROM df.instances WHERE id = '$live'")
  or die 'the live instance did not start';

# 10,050 finished instances of the last hour, oldest first, written directly
# (one node each), as the engine leaves finished instances behind
$node->safe_psql('postgres', q{
BEGIN;
INSERT INTO df.instances (id, root_node, status, submitted_by, created_at, completed_at)
SELECT lpad(to_hex(g), 8, '0'), lpad(to_hex(g), 8, '0'), 'completed', 'df_user'::regrole,
       now() - interval '1 hour' + g * interval '10 ms', now() - interval '1 hour' + g * interval '10 ms'
FROM generate_series(1, 10050) g;
INSERT INTO df.nodes (id, instance_id, node_type, query, status, submitted_by)
SELECT lpad(to_hex(g), 8, '0'), lpad(to_hex(g), 8, '0'), 'SQL', 'SELECT 1', 'completed', 'df_user'::regrole
FROM generate_series(1, 10050) g;
COMMIT;
});

ok( $node->poll_query_until('postgres',
		"SELECT count(*) = 10000 FROM df.instances WHERE status = 'completed'"),
	'retention keeps the newest 10,000 finished instances');
is( $node->safe_psql('postgres', q{
SELECT min(id) || ' ' || max(id) FROM df.instances WHERE status = 'completed'}),
	sprintf('%08x %08x', 51, 10050), 'the oldest 50 are the ones removed');
is( $node->safe_psql('postgres', q{
SELECT count(*) FROM df.nodes n WHERE NOT EXISTS (SELECT 1 FROM df.instances i WHERE i.id = n.instance_id)}),
	'0', 'no node is left without its instance');
is($node->safe_psql('postgres', "SELECT status FROM df.instances WHERE id = '$live'"),
	'running', 'the live instance is untouched');

$node->stop;
done_testing();

# Retention with pg_durable.retention_days = 0 and a one-second
# reconcile_interval: finished instances (completed, failed, cancelled)
# disappear with their nodes and events; a live instance keeps everything
# and still completes afterwards.
use strict;
use warnings;
use FindBin;
use lib "$FindBin::RealBin/../perl";
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use PgDurableTest;

my $node = engine_node('retention', 2,
	"pg_durable.retention_days = 0\npg_durable.reconcile_interval = 1\nlog_min_messages = log\n");

sub start_plain
{
	my ($graph) = @_;
	return $node->safe_psql('postgres', "SET ROLE df_user; SELECT df.start($graph)");
}

my @done = (
	start_instance($node,
		"'INSERT INTO effects (instance_id, step) VALUES (''{sys_instance_id}'', ''x'')'", 'x'),
	start_plain("'SELECT 1/0'"),
	start_plain("'SELECT 1' ~> 'SELECT 2'"));
my $cancelled = start_plain("df.sleep(600)");
my $live = start_instance($node,
	"df.wait_for_signal('go') ~> 'INSERT INTO effects (instance_id, step) VALUES (''{sys_instance_id}'', ''live'')'",
	'live');
$node->poll_query_until('postgres',
	"SELECT count(*) = 2 FROM df.instances WHERE id IN ('$cancelled', '$live') AND status = 'running'")
  or die 'the live instances did not start';
$node->safe_psql('postgres', "SELECT df.cancel('$cancelled')");

my $gone = join(',', map { "'$_'" } (@done, $cancelled));
ok( $node->poll_query_until('postgres', qq{
SELECT NOT EXISTS (SELECT 1 FROM df.instances WHERE id IN ($gone))}),
	'finished instances are removed');
is( $node->safe_psql('postgres', qq{
SELECT (SELECT count(*) FROM df.nodes WHERE instance_id IN ($gone)) || ' nodes, '
    || (SELECT count(*) FROM df_internal.events WHERE instance_id IN ($gone)) || ' events'}),
	'0 nodes, 0 events', 'their nodes and events are removed too');
is( $node->safe_psql('postgres', qq{
SELECT i.status || ', ' || (SELECT count(*) > 0 FROM df.nodes WHERE instance_id = i.id)
    || ', ' || (SELECT count(*) > 0 FROM df_internal.events WHERE instance_id = i.id)
FROM df.instances i WHERE i.id = '$live'}),
	'running, true, true', 'the live instance is untouched');

# it still runs to the end (and is then removed in turn)
$node->safe_psql('postgres', "SET ROLE df_user; SELECT df.signal('$live', 'go')");
ok( $node->poll_query_until('postgres',
		"SELECT count(*) = 1 FROM effects WHERE instance_id = '$live' AND step = 'live'"),
	'the live instance completes');
ok( $node->poll_query_until('postgres',
		"SELECT NOT EXISTS (SELECT 1 FROM df.instances WHERE id = '$live')"),
	'and is removed once finished');
like(slurp_file($node->logfile), qr/retention removed \d+ finished instances/, 'retention is logged');

$node->stop;
done_testing();

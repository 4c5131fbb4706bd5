# Sagas: compensation survives crashes.  Each round starts a
# three-step saga whose last step fails, so its undos run u3, u2, u1, each
# a SQL step that sleeps and records its effect.  Rounds kill (SIGKILL) the
# executor inside one of the undos, cycling over the three, and one round
# stops the server (immediate) between two undos.  Every instance must end
# 'compensated' with every forward and undo effect exactly once and the
# undos in reverse completion order.
use strict;
use warnings;
use FindBin;
use lib "$FindBin::RealBin/../perl";
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use PgDurableTest;

my $workers = 2;
my $node = engine_node('saga', $workers);

sub saga_graph
{
	return sprintf(
		"df.seq(df.seq(df.seq(df.with_undo('%s', '%s'), df.with_undo('%s', '%s')), "
		  . "df.with_undo('%s', '%s')), 'SELECT 1/0')",
		step_sql('f1', 0), step_sql('u1'),
		step_sql('f2', 0), step_sql('u2'),
		step_sql('f3', 0), step_sql('u3'));
}

my @ids;

sub check_round
{
	my ($what) = @_;
	my $ok = wait_instances_done($node, $what);
	my $n = scalar @ids;
	$ok &= is( $node->safe_psql('postgres',
			"SELECT status, count(*) FROM df.instances GROUP BY status ORDER BY status"),
		"compensated|$n", "$what: all $n instances compensated");
	$ok &= is( $node->safe_psql('postgres', q{
SELECT coalesce(string_agg(format('%s/%s: %s', instance_id, step, n), ', '), 'none')
FROM (SELECT instance_id, step, count(e.at) AS n
      FROM expected x FULL JOIN effects e USING (instance_id, step)
      GROUP BY instance_id, step, x.instance_id IS NULL
      HAVING count(e.at) <> 1 OR x.instance_id IS NULL) wrong}),
		'none', "$what: every effect exactly once");
	$ok &= is( $node->safe_psql('postgres', q{
SELECT count(*) FROM (
  SELECT instance_id, string_agg(step, ',' ORDER BY at) AS undos
  FROM effects WHERE step LIKE 'u%' GROUP BY instance_id) s
WHERE undos <> 'u3,u2,u1'}),
		'0', "$what: undos in reverse completion order");
	return $ok;
}

my @targets = qw(u3 u2 u1 u2);
for my $round (1 .. @targets)
{
	my $target = $targets[ $round - 1 ];
	push @ids, start_instance($node, saga_graph(), qw(f1 f2 f3 u1 u2 u3));

	my $pid = executor_pid_in_step($node, "%''$target''%");
	my $offset = -s $node->logfile;
	ok(kill('KILL', $pid), "round $round: SIGKILL executor $pid inside undo $target");
	$node->wait_for_log(qr/all server processes terminated; reinitializing/, $offset);
	wait_engine_ready($node, $workers);
	last unless check_round("round $round");
}

# a stop between two undos: u3 has committed, u2 may be under way
push @ids, start_instance($node, saga_graph(), qw(f1 f2 f3 u1 u2 u3));
my $last = $ids[-1];
ok(query_until($node, "SELECT count(*) = 1 FROM effects WHERE instance_id = '$last' AND step = 'u3'"),
	'restart round: undo u3 committed');
$node->stop('immediate');
$node->start;
wait_engine_ready($node, $workers);
check_round('restart round');

is( $node->safe_psql('postgres', q{
SELECT string_agg(DISTINCT state, ',') FROM df_internal.compensations}),
	'done', 'every registered undo done');
check_engine_empty($node);

$node->stop('fast');
done_testing();

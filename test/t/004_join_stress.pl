# Stress the JOIN on many executors: 200 instances of a 3-way JOIN (each
# branch records its effect keyed by (instance, branch)) started as fast as
# one session can, on 4 executors.  Every instance must complete with its
# three branch results, every branch effect must exist exactly once, the
# engine tables must be empty afterwards, and the server log must not
# mention a deadlock.
#
# PG_DURABLE_LONG_TESTS=1 runs 2000 instances; PG_DURABLE_STRESS_INSTANCES=N
# runs N.
use strict;
use warnings;
use FindBin;
use lib "$FindBin::RealBin/../perl";
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use PgDurableTest;

my $ninstances = $ENV{PG_DURABLE_STRESS_INSTANCES}
  // ($ENV{PG_DURABLE_LONG_TESTS} ? 2000 : 200);
my $workers = 4;

my $node = engine_node('join_stress', $workers, "log_statement = none\n");

sub branch
{
	my ($b) = @_;
	return "INSERT INTO effects (instance_id, step) "
	  . "VALUES (''{sys_instance_id}'', ''$b'') RETURNING step";
}
my $graph = sprintf("df.join3('%s', '%s', '%s')", branch('b1'), branch('b2'), branch('b3'));

# One session, one transaction per df.start (the executors start working on
# the first instances while the later ones are being started), recording
# what each instance must do in the same transaction.
my $script = "SET ROLE $PgDurableTest::ROLE;\n";
$script .= "WITH s AS (SELECT df.start($graph) AS id) "
  . "INSERT INTO expected SELECT id, b FROM s, unnest('{b1,b2,b3}'::text[]) b;\n"
  for 1 .. $ninstances;
# expected is written by the workflow role here
$node->safe_psql('postgres', "GRANT INSERT ON expected TO $PgDurableTest::ROLE");
# (an executor crash ends the session early: IPC::Run then dies on a broken pipe)
my ($ret, $stdout, $stderr) = (-1, '', '');
eval {
	($ret, $stdout, $stderr) = $node->psql('postgres', $script, on_error_stop => 1);
	1;
} or $stderr = $@;
is($ret, 0, "$ninstances instances started") or diag substr($stderr, 0, 500);

if (wait_instances_done($node, "$ninstances instances"))
{
	check_effects($node, $ninstances);
	is( $node->safe_psql('postgres', q{
	SELECT count(*) FROM df.nodes
	WHERE node_type = 'JOIN' AND status = 'completed'
	  AND result = '[{"rows": [{"step": "b1"}], "row_count": 1},
	                 {"rows": [{"step": "b2"}], "row_count": 1},
	                 {"rows": [{"step": "b3"}], "row_count": 1}]'::jsonb}),
		$ninstances,
		'every JOIN result lists its three branch results in order');
	check_engine_empty($node);
}

my $log = slurp_file($node->logfile);
unlike($log, qr/terminated by signal/, 'no executor crashed');
unlike($log, qr/deadlock detected/, 'no deadlock in the server log');
unlike($log, qr/ERROR:|failed when it was loaded/, 'no engine error in the server log');

$node->stop('fast');
done_testing();

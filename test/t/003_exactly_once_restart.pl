# Exactly-once SQL steps across server crashes: stop the whole server in
# immediate mode (no shutdown checkpoint, every process killed) while
# workflows run, start it again and check that every instance completes and
# every step's effect exists exactly once.
#
# The rounds cycle through where the stop lands: inside a step of a
# sequence, inside a JOIN branch, inside the step after a JOIN, and right
# after df.start committed (the starts may not have been taken yet).
#
# 4 rounds by default; PG_DURABLE_LONG_TESTS=1 runs 24,
# PG_DURABLE_RESTART_ROUNDS=N runs N.
use strict;
use warnings;
use FindBin;
use lib "$FindBin::RealBin/../perl";
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use PgDurableTest;

my $rounds = $ENV{PG_DURABLE_RESTART_ROUNDS}
  // ($ENV{PG_DURABLE_LONG_TESTS} ? 24 : 4);
my $workers = 2;

my $node = engine_node('restart', $workers);

my %shapes = crash_shapes();
# undef: stop as soon as the instances are started
my @targets = ('s2', 'j1', 'j3', undef);

my $ninstances = 0;
for my $round (1 .. $rounds)
{
	my $target = $targets[ ($round - 1) % @targets ];
	my $where = defined $target ? "inside step $target" : 'right after df.start';

	for my $shape (sort keys %shapes)
	{
		start_instance($node, $shapes{$shape}{graph}, @{ $shapes{$shape}{steps} });
		$ninstances++;
	}
	executor_pid_in_step($node, "%''$target''%") if defined $target;

	$node->stop('immediate');
	$node->start;
	wait_engine_ready($node, $workers);
	pass("round $round: server stopped in immediate mode $where and restarted");

	# after a failed round the next ones would only repeat its failure
	my $ok = wait_instances_done($node, "round $round");
	$ok = check_effects($node, $ninstances) && $ok;
	last unless $ok;
}

check_engine_empty($node);
is( $node->safe_psql('postgres', 'SELECT count(*) FROM effects'),
	$ninstances * 3,
	'as many effects as steps');

$node->stop('fast');
done_testing();

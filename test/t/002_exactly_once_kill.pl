# Exactly-once SQL steps across executor crashes: SIGKILL an executor while
# it is inside a SQL step, let the postmaster reinitialize (restart_after_crash)
# and check that every instance completes and every step's effect exists
# exactly once: the killed step's uncommitted effect is gone and it ran again,
# and no step that had committed ran a second time.
#
# Each round starts one instance of each shape (a sequence, a JOIN followed by
# a step, a JOIN of a sequence and a step) and kills the executor running the
# next step key of a cycle that covers every step of every shape, so kills
# land in sequences, in JOIN branches while the sibling runs, and after JOINs.
#
# 10 rounds by default; PG_DURABLE_LONG_TESTS=1 runs 60 (every step key six
# times), PG_DURABLE_KILL_ROUNDS=N runs N.
use strict;
use warnings;
use FindBin;
use lib "$FindBin::RealBin/../perl";
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use PgDurableTest;

my $rounds = $ENV{PG_DURABLE_KILL_ROUNDS}
  // ($ENV{PG_DURABLE_LONG_TESTS} ? 60 : 10);
my $workers = 3;

my $node = engine_node('kill', $workers);

my %shapes = crash_shapes();
my @targets = qw(s1 j1 a1 s2 j2 a2 s3 j3 b1);

my $ninstances = 0;
for my $round (1 .. $rounds)
{
	my $target = $targets[ ($round - 1) % @targets ];

	# the shape that holds the target last, so that its first step cannot
	# have finished before we look for it while the others were started
	for my $shape (sort { (grep { $_ eq $target } @{ $shapes{$a}{steps} }) <=>
				(grep { $_ eq $target } @{ $shapes{$b}{steps} }) || $a cmp $b } keys %shapes)
	{
		start_instance($node, $shapes{$shape}{graph}, @{ $shapes{$shape}{steps} });
		$ninstances++;
	}

	my $pid = executor_pid_in_step($node, "%''$target''%");
	my $offset = -s $node->logfile;
	ok(kill('KILL', $pid), "round $round: SIGKILL executor $pid inside step $target");
	$node->wait_for_log(qr/all server processes terminated; reinitializing/, $offset);
	wait_engine_ready($node, $workers);
	ok(!kill(0, $pid), "round $round: executor $pid is gone");

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

# Stress and chaos, short form: on 8 executors, every shape of
# PgDurableStress (JOINs of two and three, a JOIN then a step, JOINs nested
# three levels, a RACE of two JOINs, a loop whose body is a JOIN, branches
# whose user SQL deadlocks on purpose, a 1,000-branch fan-out) started at
# once, first without chaos and then while executors are SIGKILLed every few
# hundred milliseconds.  After each run: every instance completed, every
# effect exactly once, no engine deadlock in the log, user deadlocks retried,
# nothing stranded, the task queue empty, df.check() empty.
#
# The long form (more instances, every chaos variant) is bash bench/stress;
# it runs this file with these variables:
#   PG_DURABLE_STRESS_PER=N        instances of each small shape (default 20)
#   PG_DURABLE_STRESS_FANOUTS=N    1,000-branch fan-outs (default 1)
#   PG_DURABLE_STRESS_CHAOS=LIST   variants after the plain run, comma-separated
#                                  (kill, terminate, restart, errors, mixed;
#                                  default kill)
#   PG_DURABLE_STRESS_KILLS=N      kills / terminations per variant (default 6)
#   PG_DURABLE_STRESS_RESTARTS=N   restarts in the restart variant (default 1)
use strict;
use warnings;
use FindBin;
use lib "$FindBin::RealBin/../perl";
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use PgDurableTest;
use PgDurableStress;

my $workers = 8;
my $per = $ENV{PG_DURABLE_STRESS_PER} // 20;
my $fanouts = $ENV{PG_DURABLE_STRESS_FANOUTS} // 1;
my @chaos = split /,/, ($ENV{PG_DURABLE_STRESS_CHAOS} // 'kill');
my $kills = $ENV{PG_DURABLE_STRESS_KILLS} // 6;
my $restarts = $ENV{PG_DURABLE_STRESS_RESTARTS} // 1;

my $node = stress_node('stress', $workers);

my $plain = stress_run($node, $workers, chaos => 'none', per => $per, fanouts => $fanouts);
my $deadlocks = $plain->{retried_user_deadlocks};

for my $c (@chaos)
{
	my $r = stress_run($node, $workers, chaos => $c, per => $per, fanouts => $fanouts,
		kills => $kills, restarts => $restarts);
	$deadlocks += $r->{retried_user_deadlocks};
	cmp_ok($r->{kills}, '>', 0, 'executors were killed') if $c eq 'kill';
	cmp_ok($r->{terminations}, '>', 0, 'executors were terminated') if $c eq 'terminate';
	cmp_ok($r->{restarts}, '>', 0, 'the server was restarted') if $c eq 'restart';
	cmp_ok($r->{faults}, '>', 0, 'errors were injected') if $c eq 'errors' || $c eq 'mixed';
	cmp_ok($r->{kills} + $r->{terminations}, '>', 0, 'executors were killed or terminated')
	  if $c eq 'mixed';
}

# The deadlock shape must really deadlock, or it proves nothing.  Its two
# branches deadlock only when they run at once, in two executors: a batch
# runs them one after the other (the first gives way after the batch's
# budget, the second waits behind every task queued before it), so a run
# without chaos deadlocks a few of them or none (4 of 300 seen in one
# run, 0 of 1,000 in one bench/stress --long).  The runs with chaos re-run many at once (hundreds
# of deadlocks there).  Any run counts.
cmp_ok($deadlocks, '>', 0, 'the deadlock shape deadlocked and was retried');

$node->stop('fast');
done_testing();

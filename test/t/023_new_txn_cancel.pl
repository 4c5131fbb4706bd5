# A df.start(..., transaction_mode => 'new') whose caller is cancelled while
# its background session waits for a lock the caller holds (the
# race behind tenancy_new scenario 8 leaving an instance behind on a loaded
# machine).  TerminateBackgroundWorker only asks the postmaster to signal the
# session: if the caller's error released its locks before the session was
# gone, the session would get the lock at the ROLLBACK and commit the
# workflow the caller was told did not start.  The postmaster is stopped
# (SIGSTOP) across the cancel to make the postmaster's delay as long as the
# test wants: the caller must wait for its session, not ROLLBACK without it,
# and no instance may be left.
use strict;
use warnings;
use FindBin;
use lib "$FindBin::RealBin/../perl";
use IPC::Run;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(usleep time);
use PgDurableTest;

my $node = engine_node('new_txn_cancel', 1);
my $role = $PgDurableTest::ROLE;
$node->safe_psql('postgres', "SELECT df.grant_usage('$role')");
my $before = $node->safe_psql('postgres', 'SELECT count(*) FROM df.instances');

my $postmaster = $node->{_pid} or die "no postmaster pid";
my $stopped = 0;
END { kill 'CONT', $postmaster if $stopped; }

# the caller: holds a lock its session needs, and is cancelled by its
# statement_timeout while the session waits for it
my ($out, $err) = ('', '');
my $caller = IPC::Run::start(
	[ 'psql', '-XAtq', '-d', $node->connstr('postgres'), '-c', qq{
BEGIN;
LOCK df.instances IN SHARE MODE;
SET LOCAL statement_timeout = '2s';
SET LOCAL ROLE $role;
SELECT df.start('SELECT 1', transaction_mode => 'new');
} ],
	'<', \undef, '>', \$out, '2>', \$err);

ok( query_until($node,
		"SELECT EXISTS (SELECT 1 FROM pg_stat_activity WHERE backend_type = 'pg_durable session' "
		  . "AND wait_event_type = 'Lock')"),
	'the background session waits for the caller\'s lock');

kill 'STOP', $postmaster;
$stopped = 1;
# The statement_timeout fires within 2 s.  Without the wait for the session,
# the caller's psql would be done in that time; with it, the caller waits
# for its session, which the stopped postmaster does not signal yet.
my $deadline = time() + 5;
while ($caller->pumpable && time() < $deadline)
{
	$caller->pump_nb;
	usleep(50_000);
}
my $finished_early = !$caller->pumpable;
kill 'CONT', $postmaster;
$stopped = 0;
ok(!$finished_early, 'the cancelled caller waits until its session is gone');

$caller->finish;
like($err, qr/canceling statement due to statement timeout/, 'the caller was cancelled');

ok( query_until($node,
		"SELECT NOT EXISTS (SELECT 1 FROM pg_stat_activity WHERE backend_type = 'pg_durable session')"),
	'no background session is left');
is($node->safe_psql('postgres', 'SELECT count(*) FROM df.instances'), $before,
	'no instance is left behind');
is($node->safe_psql('postgres', 'SELECT count(*) FROM df_internal.tasks'), '0',
	'no task is left behind');

$node->stop;
done_testing();

# The admission slots of df.start(..., transaction_mode => 'new')
# are in shared memory, where only the engine takes them: as advisory
# locks, which any role can take, an ordinary role holding them would block
# every 'new' start.  Also: a launching backend that is cancelled, or terminated,
# while it holds a slot gives it back.  The exact timeout text when the
# slots are really full is checked by t/013_new_transaction.pl.
use strict;
use warnings;
use FindBin;
use lib "$FindBin::RealBin/../perl";
use IPC::Run;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(usleep);
use PgDurableTest;

my $node = engine_node('admission_slots', 2);
$node->safe_psql('postgres', q{
CREATE ROLE carol LOGIN;
SELECT df.grant_usage('carol');
CREATE ROLE mallory LOGIN;
});

# 1. an ordinary role, without any df privilege, holds the reference's
# admission locks for both slots (max_new_transaction_starts = 2)
my $mallory = $node->background_psql('postgres', extra_params => [ '-U', 'mallory' ]);
$mallory->query_safe(
	'SELECT pg_advisory_lock(1346982470, 0), pg_advisory_lock(1346982470, 1)');
is( $node->safe_psql('postgres', q{
SELECT count(*) FROM pg_locks
WHERE locktype = 'advisory' AND classid = 1346982470 AND objsubid = 2 AND granted}),
	'2', 'mallory holds both advisory locks');

my ($ret, $id, $err) = $node->psql('postgres', q{
SET ROLE carol;
SELECT df.start('SELECT 1 AS one', 'past mallory', transaction_mode => 'new');});
is($ret, 0, "a 'new' start succeeds while mallory holds the locks")
  or diag($err);
like($id, qr/^[0-9a-f]{8}$/, 'and returns an instance id');
is( $node->safe_psql('postgres', "SET ROLE carol; SELECT df.await_instance('$id', 120)"),
	'completed', 'the instance completes');
$mallory->quit;

# 2. a launch cancelled, and one terminated, while holding a slot: both
# slots free again afterwards
sub slots_held
{
	return $node->safe_psql('postgres', 'SELECT df_internal.admission_slots_held()');
}
is(slots_held(), '0', 'no slot held at rest');

my $holder = $node->background_psql('postgres');
$holder->query_safe('BEGIN');
$holder->query_safe('LOCK df.instances');

my (@h, @out, @err);
for my $i (0 .. 1)
{
	($out[$i], $err[$i]) = ('', '');
	$h[$i] = IPC::Run::start(
		[
			'psql', '-X', '-q', '-A', '-t', '-d', $node->connstr('postgres'),
			'-c', "SET application_name = 'launch_$i'",
			'-c', 'SET ROLE carol',
			'-c', "SELECT df.start('SELECT $i', transaction_mode => 'new')"
		],
		'>', \$out[$i], '2>', \$err[$i]);
}
ok( $node->poll_query_until('postgres', q{
SELECT count(*) = 2 FROM pg_stat_activity
WHERE backend_type = 'pg_durable session' AND wait_event_type = 'Lock'}),
	'both launches wait for the lock in their background sessions');
is(slots_held(), '2', 'holding both slots');

$node->safe_psql('postgres',
	"SELECT pg_cancel_backend(pid) FROM pg_stat_activity WHERE application_name = 'launch_0'");
$node->safe_psql('postgres',
	"SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = 'launch_1'");
$_->finish for @h;
like($err[0], qr/canceling statement due to user request/, 'launch 0 was cancelled');
like($err[1], qr/terminating connection due to administrator command/,
	'launch 1 was terminated');
ok( $node->poll_query_until('postgres',
		"SELECT df_internal.admission_slots_held() = 0"),
	'both slots are free again');

$holder->query_safe('COMMIT');
$holder->quit;

# the slots work again: two launches in a row
for my $i (1 .. 2)
{
	my $next = $node->safe_psql('postgres', q{
SET ROLE carol;
SELECT df.start('SELECT 2 AS two', transaction_mode => 'new');});
	like($next, qr/^[0-9a-f]{8}$/, "launch $i after the cancel and the termination");
}
ok( $node->poll_query_until('postgres', q{
SELECT count(*) = 0 FROM df.instances WHERE status IN ('pending', 'running')}),
	'every instance ends');
ok( $node->poll_query_until('postgres', q{
SELECT count(*) = 0 FROM pg_stat_activity WHERE backend_type = 'pg_durable session'}),
	'no background session is left');
check_engine_empty($node);
$node->stop;
done_testing();

# df.start(..., transaction_mode => 'new') under contention, as in the
# reference (its test 66): while a session holds LOCK df.instances, four
# concurrent launches with the default pg_durable.max_new_transaction_starts
# = 2 and new_transaction_start_timeout = 5: two take the admission slots
# and wait for the lock in their background sessions, two time out with
# the reference's error; after the lock is released the two waiting ones
# succeed.  No stray rows, no admission slot and no background session are
# left.  Also: a 'new' start into another database, and the instances belong
# to the caller (another role cannot see them).  The roles cannot connect to
# the server at all (pg_hba.conf rejects them): no loopback connection is used.
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

my $node = engine_node('new_transaction', 2);
$node->safe_psql('postgres', q{
CREATE ROLE carol LOGIN;
CREATE ROLE dave LOGIN;
SELECT df.grant_usage('carol');
SELECT df.grant_usage('dave');
CREATE DATABASE appdb;
});
$node->safe_psql('appdb', 'CREATE TABLE t (who text); GRANT INSERT ON t TO PUBLIC;');

# no loopback connection, no password, no trust: carol and dave cannot log in
# by any connection at all, and their 'new' starts still work
{
	my $hba = $node->data_dir . '/pg_hba.conf';
	open(my $in, '<', $hba) or die "cannot read $hba: $!";
	my $old = do { local $/; <$in> };
	close $in;
	open(my $fh, '>', $hba) or die "cannot write $hba: $!";
	print $fh "local all carol,dave reject\nhost all carol,dave all reject\n" . $old;
	close $fh;
	$node->reload;
	my ($ret, $o, $e) = $node->psql('postgres', 'SELECT 1', extra_params => [ '-U', 'carol' ]);
	isnt($ret, 0, 'carol cannot connect to the server');
	like($e, qr/pg_hba\.conf rejects connection/, 'pg_hba.conf rejects her');
}

my $before = $node->safe_psql('postgres', 'SELECT count(*) FROM df.instances');

# 1. four launches while df.instances is locked
my $holder = $node->background_psql('postgres');
$holder->query_safe('BEGIN');
$holder->query_safe('LOCK df.instances');

my (@h, @out, @err);
for my $i (0 .. 3)
{
	($out[$i], $err[$i]) = ('', '');
	$h[$i] = IPC::Run::start(
		[
			'psql', '-X', '-q', '-A', '-t', '-d', $node->connstr('postgres'),
			'-c', 'SET ROLE carol',
			'-c', "SELECT df.start('SELECT $i AS launch', 'launch $i', transaction_mode => 'new')"
		],
		'>', \$out[$i], '2>', \$err[$i]);
}

sub finished
{
	my ($harness) = @_;
	eval { $harness->pump_nb; };
	return !$harness->pumpable;
}

# two of them time out after 5 s; the other two wait for the lock
my $deadline = time + 180;
my @done;
while (time < $deadline)
{
	@done = grep { finished($h[$_]) } 0 .. 3;
	last if @done >= 2;
	usleep(100_000);
}
is(scalar @done, 2, 'two launches ended while df.instances is locked');
my $limit_error =
  "pg_durable: transaction_mode => 'new' launch limit reached (max_new_transaction_starts=2). "
  . "Timed out after 5s waiting for a launch slot before opening the loopback session.";
for my $i (@done)
{
	like($err[$i], qr/ERROR:  \Q$limit_error\E/, "launch $i timed out with the reference's error");
}
ok( $node->poll_query_until('postgres', q{
SELECT count(*) = 2 FROM pg_stat_activity
WHERE backend_type = 'pg_durable session' AND wait_event_type = 'Lock'}),
	'the other two wait for the lock in their background sessions');
is( $node->safe_psql('postgres', 'SELECT df_internal.admission_slots_held()'),
	'2', 'holding the two admission slots');

$holder->query_safe('COMMIT');
$holder->quit;
$_->finish for @h;

my @ids;
for my $i (grep { my $i = $_; !grep { $_ == $i } @done } 0 .. 3)
{
	chomp $out[$i];
	like($out[$i], qr/^[0-9a-f]{8}$/, "launch $i succeeded after the lock was released");
	push @ids, $out[$i];
}
is( $node->safe_psql('postgres', 'SELECT count(*) FROM df.instances') - $before,
	2, 'exactly two instances exist: no stray rows');
for my $id (@ids)
{
	is( $node->safe_psql('postgres',
			"SET ROLE carol; SELECT df.await_instance('$id', 120)"),
		'completed', "instance $id completed");
	is( $node->safe_psql('postgres', "SELECT submitted_by FROM df.instances WHERE id = '$id'"),
		'carol', 'as carol');
	is( $node->safe_psql('postgres',
			"SET ROLE dave; SELECT count(*) FROM df.instances WHERE id = '$id'"),
		'0', 'which dave cannot see');
}
is( $node->safe_psql('postgres', 'SELECT df_internal.admission_slots_held()'),
	'0', 'no admission slot is left');
ok( $node->poll_query_until('postgres', q{
SELECT count(*) = 0 FROM pg_stat_activity WHERE backend_type = 'pg_durable session'}),
	'no background session is left');

# 2. 'new' into another database: df.start in the background session checks
# the database, the step runs there
my $id = $node->safe_psql('postgres', q{
SET ROLE carol;
SELECT df.start('INSERT INTO t SELECT current_user', NULL, 'appdb', 'new');});
like($id, qr/^[0-9a-f]{8}$/, "a 'new' start into appdb");
is($node->safe_psql('postgres', "SET ROLE carol; SELECT df.await_instance('$id', 120)"),
	'completed', 'completes');
is($node->safe_psql('appdb', 'SELECT who FROM t'), 'carol', 'its step ran in appdb as carol');
$node->safe_psql('postgres', 'REVOKE CONNECT ON DATABASE appdb FROM PUBLIC');
my ($ret, $out, $err) = $node->psql('postgres', q{
SET ROLE dave;
SELECT df.start('SELECT 1', NULL, 'appdb', 'new');});
like($err, qr/ERROR:  permission denied for database "appdb"/,
	"a 'new' start into a database without CONNECT fails with df.start's error");

check_engine_empty($node);
$node->stop;
done_testing();

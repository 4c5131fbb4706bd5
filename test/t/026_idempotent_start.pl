# df.start(…, idempotency_key) from 8 concurrent sessions: each
# round, 8 sessions wait on an advisory lock, are let go at once and start
# the same workflow with one key in transactions that stay open a moment, so
# that they overlap.  Every session must get the same instance id, the key
# must have one instance, and its step must run once.  One round goes
# through transaction_mode => 'new', whose background sessions commit on
# their own; a last start after completion still returns the instance.
use strict;
use warnings;
use FindBin;
use lib "$FindBin::RealBin/../perl";
use IPC::Run;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use PgDurableTest;

my $node = engine_node('idempotent_start', 4);
my $role = $PgDurableTest::ROLE;
my $sessions = 8;

sub round
{
	my ($key, $mode) = @_;
	my $barrier = $node->background_psql('postgres');
	$barrier->query_safe('SELECT pg_advisory_lock(17)');

	my $graph = "'INSERT INTO effects (instance_id, step) "
	  . "VALUES (''{sys_instance_id}'', ''{sys_idempotency_key}'')'";
	my (@runs, @out, @err);
	for my $i (0 .. $sessions - 1)
	{
		($out[$i], $err[$i]) = ('', '');
		# (from a file: psql -c takes no backslash commands, and IPC::Run
		# feeds a scalar stdin only while it is pumped)
		my $sql = qq{
SELECT pg_advisory_lock_shared(17) \\g /dev/null
SELECT pg_advisory_unlock_shared(17) \\g /dev/null
BEGIN;
SET LOCAL ROLE $role;
SELECT df.start($graph, transaction_mode => '$mode', idempotency_key => '$key');
SELECT pg_sleep(0.3) \\g /dev/null
COMMIT;
};
		my $file = "$PostgreSQL::Test::Utils::tmp_check/idem_$key.sql";
		PostgreSQL::Test::Utils::append_to_file($file, $sql) unless -e $file;
		push @runs,
		  IPC::Run::start([ 'psql', '-XAtq', '-v', 'ON_ERROR_STOP=1', '-d',
				$node->connstr('postgres'), '-f', $file ],
			'<', \undef, '>', \$out[$i], '2>', \$err[$i]);
	}
	ok( query_until($node,
			"SELECT count(*) = $sessions FROM pg_locks "
			  . "WHERE locktype = 'advisory' AND objid = 17 AND NOT granted"),
		"$key: $sessions sessions wait at the barrier");
	$barrier->query_safe('SELECT pg_advisory_unlock(17)');
	$barrier->quit;
	$_->finish for @runs;

	my %ids;
	for my $i (0 .. $sessions - 1)
	{
		chomp $out[$i];
		diag "session $i: $err[$i]" if $err[$i] ne '';
		$ids{ $out[$i] }++;
	}
	my @got = keys %ids;
	is(scalar(@got), 1, "$key: every session got the same instance id")
	  or diag join(', ', map { "'$_' x $ids{$_}" } @got);
	like($got[0], qr/^[0-9a-f]{8}$/, "$key: it is an instance id");
	is($node->safe_psql('postgres',
			"SELECT count(*) FROM df.instances WHERE idempotency_key = '$key'"),
		'1', "$key: one instance");
	is($node->safe_psql('postgres',
			"SET ROLE $role; SELECT df.await_instance('$got[0]', 60)"),
		'completed', "$key: it completed");
	is($node->safe_psql('postgres',
			"SELECT count(*) FROM effects WHERE step = '$key'"),
		'1', "$key: its step ran once");
	is($node->safe_psql('postgres',
			"SET ROLE $role; SELECT df.start($graph, idempotency_key => '$key')"),
		$got[0], "$key: a start after completion returns it");
	return;
}

round("caller-$_", 'caller') for 1 .. 4;
round('new-1', 'new');

$node->stop;
done_testing();

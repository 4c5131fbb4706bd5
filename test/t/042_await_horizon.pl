# CALL df.await waits without holding back the xmin horizon.
# A function keeps the snapshot of the statement that called it for as
# long as it runs, so df.await_instance, waiting for a long workflow,
# keeps VACUUM from removing any row deleted meanwhile, anywhere in the
# database; the engine's own queues then keep every entry they had, and a
# wide fan-out's looks at its instance grow with them.  The procedure
# commits before it sleeps (a top-level CALL may): while it waits, its
# backend has no xmin and VACUUM removes what was deleted after it began.
# The function, waiting beside it, still keeps those rows; the signal ends
# both waits with the instance's status.
use strict;
use warnings;
use FindBin;
use lib "$FindBin::RealBin/../perl";
use IPC::Run;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use PgDurableTest;

my $node = engine_node('await_horizon', 2);
my $role = $PgDurableTest::ROLE;

my $id = $node->safe_psql('postgres',
	"SET ROLE $role; SELECT df.start(df.wait_for_signal('go') ~> 'SELECT 1')");
like($id, qr/^[0-9a-f]{8}$/, 'an instance that waits for a signal started');
$node->safe_psql('postgres', 'CREATE TABLE churn (i int)');

# a waiter in a session of its own: its output, its harness
sub waiter
{
	my ($sql) = @_;
	my ($out, $err) = ('', '');
	my $h = IPC::Run::start(
		[ 'psql', '-XAtq', '-v', 'ON_ERROR_STOP=1', '-d', $node->connstr('postgres'),
		  '-c', "SET ROLE $role", '-c', $sql ],
		'<', \undef, '>', \$out, '2>', \$err);
	return { h => $h, out => \$out, err => \$err };
}

# the backend running $like, waiting on its latch
sub waiting
{
	my ($like) = @_;
	return query_until($node,
		"SELECT count(*) = 1 FROM pg_stat_activity "
		  . "WHERE query LIKE '$like' AND wait_event = 'Extension'");
}

# of the backends running $like: how many hold an xmin, of how many
sub xmins
{
	my ($like) = @_;
	return $node->safe_psql('postgres',
		"SELECT count(*) FILTER (WHERE backend_xmin IS NOT NULL) || '/' || count(*) "
		  . "FROM pg_stat_activity WHERE query LIKE '$like'");
}

# delete 100 rows, vacuum the table: how many dead rows it could not remove
sub churn_and_vacuum
{
	$node->safe_psql('postgres',
		'INSERT INTO churn SELECT generate_series(1, 100); DELETE FROM churn');
	$node->safe_psql('postgres', 'VACUUM churn');
	return $node->safe_psql('postgres',
		"SELECT n_dead_tup FROM pg_stat_all_tables WHERE relid = 'churn'::regclass");
}

# 1. the procedure alone waits: it holds no xmin, and VACUUM removes the
# rows deleted while it waits (the executors' short transactions may pin
# the horizon for a moment: vacuumed again until nothing is left, with a
# deadline)
my $call = waiter("CALL df.await('$id', 300)");
ok(waiting('CALL df.await(%'), 'CALL df.await is waiting');
is(xmins('CALL df.await(%'), '0/1', 'while it waits, its backend has no xmin');
my $deadline = time() + $PostgreSQL::Test::Utils::timeout_default;
my $left;
do { $left = churn_and_vacuum() } while ($left != 0 && time() < $deadline);
is($left, '0', 'VACUUM removed the rows deleted while the procedure waited');

# 2. the function waits beside it: its statement's snapshot keeps them
my $func = waiter("SELECT df.await_instance('$id', 300)");
ok(waiting('SELECT df.await_instance(%'), 'df.await_instance is waiting');
is(xmins('SELECT df.await_instance(%'), '1/1', 'the function keeps its xmin while it waits');
is(churn_and_vacuum(), '100',
	'VACUUM could not remove the rows deleted while the function waited');
is(xmins('CALL df.await(%'), '0/1', 'the procedure still holds none');

# 3. the signal ends both waits with the instance's status
$node->safe_psql('postgres', "SET ROLE $role; SELECT df.signal('$id', 'go')");
for my $w ([ 'CALL df.await', $call ], [ 'df.await_instance', $func ])
{
	my ($what, $h) = @$w;
	ok($h->{h}->finish, "$what returned") or diag(${ $h->{err} });
	is(${ $h->{out} } =~ s/\s+$//r, 'completed', "$what: the instance completed");
}
is($node->safe_psql('postgres', 'SELECT count(*) FROM df.check()'), '0', 'df.check() is clean');

done_testing();

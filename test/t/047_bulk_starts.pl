# Bulk starts never stall (store/tasks.c, the start sweep): far more
# df.start calls in one transaction than the ready ring holds (16,384), and
# as many again in ten concurrent transactions.  The starts whose markers
# did not fit are given start tasks by the start sweep, in batches of a
# transaction each.  While they run the test samples pg_stat_activity: no
# executor transaction lasts over 5 s, and every executor takes part.
# Every instance completes with its effect exactly once.
#
# PG_DURABLE_BULK_STARTS sets the size of the one transaction and
# PG_DURABLE_BULK_EACH that of each concurrent one (default: a fifth of
# it); the defaults keep the test short (bench/stress --bulk runs more).
use strict;
use warnings;
use FindBin;
use lib "$FindBin::RealBin/../perl";
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time usleep);
use IPC::Run;
use PgDurableTest;

my $role = $PgDurableTest::ROLE;
my $WORKERS = 2;
my $N = $ENV{PG_DURABLE_BULK_STARTS} // 40000;
my $node = engine_node('bulk_starts', $WORKERS);
my $step = "'INSERT INTO effects (instance_id, step) VALUES (''{sys_instance_id}'', ''s'')'";

# Wait until no instance is left, sampling the executors' transactions.
sub watch
{
	my ($what, $total) = @_;
	my $deadline = time() + 600 + $total / 500;
	my ($longest, %busy) = (0);
	my $done = 0;
	while (time() < $deadline)
	{
		my $rows = $node->safe_psql('postgres', q{
SELECT pid, COALESCE(extract(epoch FROM clock_timestamp() - xact_start), 0)
FROM pg_stat_activity WHERE backend_type = 'pg_durable executor'
UNION ALL
SELECT 0, count(*) FROM df.instances WHERE status IN ('pending', 'running')});
		my $left;
		for my $line (split /\n/, $rows)
		{
			my ($pid, $v) = split /\|/, $line;
			if ($pid == 0) { $left = $v; next; }
			$longest = $v if $v > $longest;
			$busy{$pid} = 1 if $v > 0;
		}
		if ($left == 0) { $done = 1; last; }
		last if $longest > 60;    # stalled: no need to wait for the end
		usleep(100_000);
	}
	ok($done, "$what: every instance finished");
	cmp_ok($longest, '<', 5, "$what: no executor transaction lasted 5 s (longest seen ${longest} s)");
	is(scalar(keys %busy), $WORKERS, "$what: every executor took part");
	is( $node->safe_psql('postgres', "SELECT count(*) FROM df.instances WHERE status = 'completed'"),
		$total, "$what: $total instances completed");
	is( $node->safe_psql('postgres',
			'SELECT count(*) FROM (SELECT instance_id FROM effects GROUP BY instance_id HAVING count(*) <> 1) x'),
		'0', "$what: each step ran exactly once");
	is($node->safe_psql('postgres', 'SELECT count(*) FROM effects'), $total,
		"$what: one effect per instance");
	return;
}

# --- 1. $N starts in one transaction ------------------------------------------
my $t0 = time();
$node->safe_psql('postgres',
	"SET ROLE $role; SELECT count(df.start($step)) FROM generate_series(1, $N);");
note sprintf("%d starts committed in %.1f s", $N, time() - $t0);
watch("$N starts in one transaction", $N);
note sprintf("%d starts ran in %.1f s", $N, time() - $t0);

# --- 2. twice as many in ten concurrent transactions --------------------------
my $each = $ENV{PG_DURABLE_BULK_EACH} // int($N / 5);
$t0 = time();
my @runs = map {
	IPC::Run::start(
		[ 'psql', '-XAtq', '-v', 'ON_ERROR_STOP=1', '-d', $node->connstr('postgres'),
		  '-c', "SET ROLE $role; SELECT count(df.start($step)) FROM generate_series(1, $each);" ],
		'<', \undef, '>', \my $o, '2>', \my $e)
} 1 .. 10;
ok($_->finish, 'a transaction of starts committed') for @runs;
watch("$each starts in each of ten transactions", $N + 10 * $each);
note sprintf("%d more starts ran in %.1f s", 10 * $each, time() - $t0);

is($node->safe_psql('postgres', 'SELECT count(*) FROM df.check()'), '0', 'df.check() is clean');
done_testing();

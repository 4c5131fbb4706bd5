# Bulk starts never stall (store/tasks.c, the start sweep): far more
# df.start calls in one transaction than the ready ring holds (16,384), and
# as many again in ten concurrent transactions.  The starts whose markers
# did not fit are given start tasks by the start sweep, in batches of a
# transaction each.  While they run the test samples pg_stat_activity: no
# executor transaction lasts over 5 s, and every executor takes part.
# Every instance completes with its effect exactly once.  First, the queue
# tables get the statistics of a busy day's end (many pages, one live row):
# a sweep planned from them as if the tables were still empty took one
# transaction of minutes, a nested loop over every pending start.
#
# PG_DURABLE_BULK_STARTS sets the size of the one transaction and
# PG_DURABLE_BULK_EACH that of each concurrent one (default: a fifth of
# it), PG_DURABLE_BULK_WARM the instances run before; the defaults keep the
# test short (bench/stress --bulk runs more).
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
my ($base, $sleepers) = (0, 0);
my $step = "'INSERT INTO effects (instance_id, step) VALUES (''{sys_instance_id}'', ''s'')'";

# Wait until no instance is left, sampling the executors' transactions.
sub watch
{
	my ($what, $total) = @_;
	my $deadline = time() + 600 + $total / 500;
	my ($longest, $what_longest, %busy) = (0, '');
	my $done = 0;
	while (time() < $deadline)
	{
		my $rows = $node->safe_psql('postgres', q{
SELECT pid, COALESCE(extract(epoch FROM clock_timestamp() - xact_start), 0),
	   replace(left(query, 60), E'\n', ' ')
FROM pg_stat_activity WHERE backend_type = 'pg_durable executor'
UNION ALL
SELECT 0, count(*), '' FROM df.instances WHERE status IN ('pending', 'running')});
		my $left;
		for my $line (split /\n/, $rows)
		{
			my ($pid, $v, $query) = split /\|/, $line, 3;
			if ($pid == 0) { $left = $v; next; }
			($longest, $what_longest) = ($v, $query // '') if $v > $longest;
			$busy{$pid} = 1 if $v > 0;
		}
		if ($left == $sleepers) { $done = 1; last; }
		last if $longest > 60;    # stalled: no need to wait for the end
		usleep(100_000);
	}
	ok($done, "$what: every instance finished");
	note "$what: the longest executor transaction seen was at: $what_longest";
	cmp_ok($longest, '<', 5, "$what: no executor transaction lasted 5 s (longest seen ${longest} s)");
	is(scalar(keys %busy), $WORKERS, "$what: every executor took part");
	is( $node->safe_psql('postgres', "SELECT count(*) FROM df.instances WHERE status = 'completed'"),
		$total + $base, "$what: $total instances completed");
	is( $node->safe_psql('postgres',
			'SELECT count(*) FROM (SELECT instance_id FROM effects GROUP BY instance_id HAVING count(*) <> 1) x'),
		'0', "$what: each step ran exactly once");
	is($node->safe_psql('postgres', 'SELECT count(*) FROM effects'), $total,
		"$what: one effect per instance");
	return;
}

# --- 0. statistics of a queue table taken when it was empty -----------------
# Queue tables are emptied as fast as they fill.  Statistics taken then, with
# a live row at the end of their pages so that VACUUM cannot truncate them,
# say a table of many pages holds almost nothing; the plans of a sweep must
# not believe it once the tables fill again.
{
	my $warm = $ENV{PG_DURABLE_BULK_WARM} // 20000;
	$node->safe_psql('postgres',
		"SET ROLE $role; SELECT count(df.start($step)) FROM generate_series(1, $warm);");
	$node->safe_psql('postgres', "SET ROLE $role; SELECT df.start('SELECT pg_sleep(0)' ~> df.sleep(3600), 'sleeper');");
	$node->poll_query_until('postgres',
		"SELECT count(*) = 1 FROM df.instances WHERE status IN ('pending', 'running')")
	  or die 'the warm-up did not finish';
	$node->safe_psql('postgres', 'VACUUM ANALYZE df_internal.tasks, df_internal.runs');
	$node->safe_psql('postgres', 'DELETE FROM effects');
	($base, $sleepers) = ($warm, 1);
	note $node->safe_psql('postgres', "SELECT relname, relpages, reltuples FROM pg_class WHERE oid IN ('df_internal.tasks'::regclass, 'df_internal.runs'::regclass)");
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

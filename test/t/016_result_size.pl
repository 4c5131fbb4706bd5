# A step result too big for jsonb fails its node instead of being retried
# forever.
#  A. pg_durable.max_result_size (1MB here): a step returning one value
#     larger than that, or very many rows, fails its node (and so its
#     instance) promptly with a message naming the setting, and the
#     executor's peak memory does not grow with what the query could have
#     returned (2 million rows, about 100MB as SPI would have held them);
#     the executor goes on running steps.  The step session of another
#     database (database => 'appdb') applies the same limit.
#  B. unexpected engine errors on one task (a trigger on df.nodes refuses
#     the node write, the way jsonb refused a too big result) are recorded:
#     df.check() reports the task (repeated_engine_errors, with the count
#     and the error), and after pg_durable.max_engine_errors (3 here) the
#     step's node fails with the error instead of being retried forever.
use strict;
use warnings;
use FindBin;
use lib "$FindBin::RealBin/../perl";
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time);
use PgDurableTest;

my $node = engine_node('result_size', 1,
	"pg_durable.max_result_size = '1MB'\npg_durable.max_engine_errors = 3\n");

sub start
{
	my ($sql) = @_;
	my $id = $node->safe_psql('postgres',
		"SET ROLE $PgDurableTest::ROLE; SELECT df.start('$sql');");
	die "df.start returned '$id'" unless $id =~ /^[0-9a-f]{8}$/;
	return $id;
}

# Wait (60 s at most) until the instance is finished; its status.
sub finished
{
	my ($id) = @_;
	my $deadline = time() + 60;
	my $status = '';
	while (time() < $deadline)
	{
		$status = $node->safe_psql('postgres',
			"SELECT status FROM df.instances WHERE id = '$id'");
		return $status if $status =~ /^(completed|failed|cancelled)$/;
		select(undef, undef, undef, 0.1);
	}
	return "still $status after 60 s";
}

sub node_result
{
	my ($id) = @_;
	return $node->safe_psql('postgres',
		"SELECT string_agg(result #>> '{}', ' | ') FROM df.nodes WHERE instance_id = '$id'");
}

# The executor's peak resident memory (kB), from /proc.
sub executor_peak_kb
{
	my $pid = $node->safe_psql('postgres',
		"SELECT pid FROM pg_stat_activity WHERE application_name = 'pg_durable executor'");
	open(my $fh, '<', "/proc/$pid/status") or return undef;
	while (<$fh>)
	{
		return $1 if /^VmHWM:\s+(\d+)\s+kB/;
	}
	return undef;
}

# A: the result size limit
is(finished(start('SELECT 1 AS warm')), 'completed', 'A: a small step completes');
my $peak_before = executor_peak_kb();

my $t0 = time();
my $big = start(q{SELECT repeat(''x'', 4 * 1024 * 1024) AS big});
is(finished($big), 'failed', 'A: a step returning a 4MB value fails its instance');
like(node_result($big),
	qr/step result exceeds pg_durable\.max_result_size \(1MB\) at row 1: return fewer or smaller rows, or raise the setting/,
	'A: the node says which limit the value exceeded');

my $many = start(q{SELECT generate_series(1, 2000000) AS g});
is(finished($many), 'failed', 'A: a step returning 2 million rows fails its instance');
like(node_result($many), qr/step result exceeds pg_durable\.max_result_size \(1MB\) at row \d+:/,
	'A: the node says which limit the rows exceeded');
my ($row) = node_result($many) =~ /at row (\d+):/;
ok(defined $row && $row > 1000 && $row < 200000,
	'A: the rows stopped at the limit (row ' . ($row // '?') . '), not at the end');
my $elapsed = time() - $t0;
ok($elapsed < 30, sprintf('A: both failed promptly (%.1f s)', $elapsed));

my $peak_after = executor_peak_kb();
SKIP:
{
	skip 'no /proc', 1 unless defined $peak_before && defined $peak_after;
	ok($peak_after - $peak_before < 40 * 1024,
		"A: the executor's peak memory grew by " . ($peak_after - $peak_before)
		  . ' kB, less than 40MB');
}
# the same limit in the step session of another database (remote.c)
$node->safe_psql('postgres', 'CREATE DATABASE appdb');
my $remote = $node->safe_psql('postgres',
	"SET ROLE $PgDurableTest::ROLE; "
	  . "SELECT df.start('SELECT generate_series(1, 2000000) AS g', database => 'appdb');");
is(finished($remote), 'failed', 'A: so does such a step in another database');
like(node_result($remote), qr/step result exceeds pg_durable\.max_result_size \(1MB\) at row \d+:/,
	'A: with the same message');

is($node->safe_psql('postgres',
	"SELECT count(*) FROM df_internal.tasks WHERE instance_id IN ('$big', '$many', '$remote')"),
	'0', 'A: no task is left to retry');
is(finished(start('SELECT 2 AS after')), 'completed', 'A: the executor goes on');

# B: repeated engine errors
$node->safe_psql('postgres', q{
CREATE FUNCTION refuse_node_write() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
	IF NEW.result::text LIKE '%poison%'
	   OR (NEW.query LIKE '%always_refuse%' AND NEW.status IN ('completed', 'failed')) THEN
		RAISE EXCEPTION 'test trigger refuses this node write';
	END IF;
	RETURN NEW;
END $$;
CREATE TRIGGER refuse_node_write BEFORE UPDATE ON df.nodes
	FOR EACH ROW EXECUTE FUNCTION refuse_node_write();
});

my $poison = start(q{SELECT ''poison'' AS x});
my $stuck = start(q{SELECT ''always_refuse'' AS x});

my $report = qr/^step task \d+ of node [0-9a-f]+ failed \d+ times in the engine; last error: test trigger refuses this node write$/;
ok( query_until($node, qq{
SELECT count(*) = 1 FROM df.check()
WHERE instance_id = '$stuck' AND problem = 'repeated_engine_errors'}),
	'B: df.check() reports the task whose engine errors repeat');
like($node->safe_psql('postgres', qq{
SELECT detail FROM df.check()
WHERE instance_id = '$stuck' AND problem = 'repeated_engine_errors'}),
	$report, 'B: with the count and the error');

is(finished($poison), 'failed', 'B: after pg_durable.max_engine_errors the node is failed');
like(node_result($poison),
	qr/step abandoned after 3 engine errors \(pg_durable\.max_engine_errors\): test trigger refuses this node write/,
	'B: with the engine error');
is($node->safe_psql('postgres', "SELECT count(*) FROM df_internal.tasks WHERE instance_id = '$poison'"),
	'0', 'B: its task is gone');
is(finished(start('SELECT 3 AS after')), 'completed', 'B: the executor goes on');

$node->safe_psql('postgres', qq{
DROP TRIGGER refuse_node_write ON df.nodes;
SELECT df.cancel('$stuck');});
is(finished($stuck), 'cancelled', 'B: the stuck instance can be cancelled');

$node->stop;
done_testing();

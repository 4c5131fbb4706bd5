# df.limit across instances.  200 instances pass through
# max_concurrent => 3 on 8 executors: each step records when it entered and
# left (clock_timestamp), and a self-join of those intervals shows how many
# were inside at each entry: never more than 3.  Then 200 instances pass
# through rate => 20 (burst 1): the entries, from the recorded timestamps,
# come at 20 per second within 10% over about 10 s, and no second holds more
# admissions (the slots' times) than the bucket allows: 1 + 20.  Last, a
# slot lost by hand (its row deleted) leaves a queued node that nothing
# wakes: df.check() reports it and reconciliation (every 2 s) pumps the
# queue, so it completes; retention then forgets the idle keys.  Both leave no slot or
# queue place behind and df.check() finds nothing.
use strict;
use warnings;
use FindBin;
use lib "$FindBin::RealBin/../perl";
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use PgDurableTest;

my $node = engine_node('limits', 8, "pg_durable.reconcile_interval = 2\n");
my $role = $PgDurableTest::ROLE;

$node->safe_psql('postgres', qq{
CREATE TABLE inside (instance_id text NOT NULL, key text NOT NULL,
                     entered timestamptz NOT NULL, left_at timestamptz NOT NULL,
                     admitted timestamptz);
GRANT INSERT, SELECT ON inside TO $role;
-- when the step's LIMIT node was admitted: its slot's row
GRANT USAGE ON SCHEMA df_internal TO $role;
GRANT SELECT ON df_internal.limit_holders TO $role;
CREATE FUNCTION limited_step(iid text, k text, secs float8) RETURNS void
LANGUAGE plpgsql AS \$\$
DECLARE
	t timestamptz := clock_timestamp();
BEGIN
	PERFORM pg_sleep(secs);
	INSERT INTO inside
	SELECT iid, k, t, clock_timestamp(),
		   (SELECT h.since FROM df_internal.limit_holders h WHERE h.instance_id = iid);
END
\$\$;
});

sub start_many
{
	my ($n, $limit) = @_;
	$node->safe_psql('postgres', qq{
SET ROLE $role;
SELECT count(df.start($limit)) FROM generate_series(1, $n);
});
	return;
}

sub engine_clean
{
	my ($what) = @_;
	is( $node->safe_psql('postgres', q{
SELECT (SELECT count(*) FROM df_internal.limit_holders) || ' holders, '
    || (SELECT count(*) FROM df_internal.limit_waiters) || ' waiters, '
    || (SELECT count(*) FROM df.check()) || ' problems'}),
		'0 holders, 0 waiters, 0 problems', "$what: no slot or queue place left, df.check() clean");
	return;
}

# --- max_concurrent => 3 ------------------------------------------------------
my $step = "'SELECT limited_step(''{sys_instance_id}'', ''c3'', 0.03)'";
start_many(200, "df.limit($step, 'c3', 3)");
wait_instances_done($node, 'max_concurrent') or diag_engine($node);
is( $node->safe_psql('postgres',
		"SELECT status, count(*) FROM df.instances GROUP BY status ORDER BY status"),
	'completed|200', 'max_concurrent: all 200 instances completed');
is($node->safe_psql('postgres', "SELECT count(*) FROM inside WHERE key = 'c3'"),
	'200', 'max_concurrent: every step ran once');
my $most = $node->safe_psql('postgres', q{
SELECT max(n) FROM (
	SELECT (SELECT count(*) FROM inside b
			WHERE b.key = 'c3' AND b.entered <= a.entered AND b.left_at > a.entered) AS n
	FROM inside a WHERE a.key = 'c3') x});
cmp_ok($most, '<=', 3, "max_concurrent: at most 3 inside at once (seen: $most)");
cmp_ok($most, '>=', 2, 'max_concurrent: the limit let more than one in at once');
engine_clean('max_concurrent');

# --- chains of three steps under one key, max_concurrent => 2 ---------------------
# a batch enters and releases the key again and again while it holds the
# key's row: a release that looks at the queue in the statement that
# deletes its slot must still hand the slot to the waiters of other
# transactions and of its own batch
my $c2 = "df.limit('SELECT limited_step(''{sys_instance_id}'', ''c2'', 0.01)', 'c2', 2)";
start_many(60, "$c2 ~> $c2 ~> $c2");
wait_instances_done($node, 'chains under c2') or diag_engine($node);
is( $node->safe_psql('postgres',
		"SELECT count(*) FILTER (WHERE status = 'completed'), count(*) FROM df.instances"),
	'260|260', 'chains under c2: all 60 completed (and the 200 before)');
is($node->safe_psql('postgres', "SELECT count(*) FROM inside WHERE key = 'c2'"),
	'180', 'chains under c2: every step ran once');
$most = $node->safe_psql('postgres', q{
SELECT max(n) FROM (
	SELECT (SELECT count(*) FROM inside b
			WHERE b.key = 'c2' AND b.entered <= a.entered AND b.left_at > a.entered) AS n
	FROM inside a WHERE a.key = 'c2') x});
cmp_ok($most, '<=', 2, "chains under c2: at most 2 inside at once (seen: $most)");
engine_clean('chains under c2');

# --- rate => 20 -----------------------------------------------------------------
$node->safe_psql('postgres', 'DELETE FROM df.instances');
$step = "'SELECT limited_step(''{sys_instance_id}'', ''r20'', 0)'";
start_many(200, "df.limit($step, 'r20', rate => 20)");
wait_instances_done($node, 'rate') or diag_engine($node);
is( $node->safe_psql('postgres',
		"SELECT status, count(*) FROM df.instances GROUP BY status ORDER BY status"),
	'completed|200', 'rate: all 200 instances completed');
my ($n, $span, $rate, $busiest) = split /\|/, $node->safe_psql('postgres', q{
SELECT count(*), round(extract(epoch FROM max(entered) - min(entered))::numeric, 3),
	   round(((count(*) - 1) / extract(epoch FROM max(entered) - min(entered)))::numeric, 2),
	   (SELECT max(c) FROM (SELECT (SELECT count(*) FROM inside b WHERE b.key = 'r20'
									AND b.admitted >= a.admitted
									AND b.admitted < a.admitted + interval '1 second') AS c
							FROM inside a WHERE a.key = 'r20') w)
FROM inside WHERE key = 'r20'});
diag "rate: $n entries over $span s: $rate per second; at most $busiest admissions in any second";
is($n, '200', 'rate: every step ran once');
cmp_ok($rate, '<=', 22, 'rate: at most 20 per second + 10%');
cmp_ok($rate, '>=', 18, 'rate: at least 20 per second - 10%');
cmp_ok($busiest, '<=', 21, 'rate: no second had more admissions than the bucket allows (1 + 20)');
is($node->safe_psql('postgres', "SELECT count(*) FROM inside WHERE key = 'r20' AND admitted IS NULL"),
	'0', 'rate: every step saw its slot');
engine_clean('rate');

# --- a stuck queue, repaired by reconciliation ------------------------------------
$node->safe_psql('postgres', 'DELETE FROM df.instances');
my $holder = $node->safe_psql('postgres',
	"SET ROLE $role; SELECT df.start(df.limit(df.wait_for_signal('go'), 'lost', 1))");
ok(query_until($node, "SELECT count(*) = 1 FROM df_internal.limit_holders WHERE regexp_replace(key, '^~[0-9]+/', '') = 'lost'"),
	'stuck: the holder has the slot');
my $waiter = $node->safe_psql('postgres',
	"SET ROLE $role; SELECT df.start(df.limit('SELECT 1', 'lost', 1))");
ok(query_until($node, "SELECT count(*) = 1 FROM df_internal.limit_waiters WHERE regexp_replace(key, '^~[0-9]+/', '') = 'lost'"),
	'stuck: the second one is queued');
# (one transaction: reconciliation must not see the slot gone before the check)
is( $node->safe_psql('postgres', q{
BEGIN;
DELETE FROM df_internal.limit_holders WHERE regexp_replace(key, '^~[0-9]+/', '') = 'lost';
SELECT string_agg(problem, ',') FROM df.check() WHERE problem LIKE 'limit%';
ROLLBACK;}),
	'limit_queue_stuck', 'stuck: df.check() reports the queue nothing will wake');
$node->safe_psql('postgres', "DELETE FROM df_internal.limit_holders WHERE regexp_replace(key, '^~[0-9]+/', '') = 'lost'");
is( $node->safe_psql('postgres', "SET ROLE $role; SELECT df.await_instance('$waiter', 60)"),
	'completed', 'stuck: reconciliation pumped the queue and the waiter completed');
$node->safe_psql('postgres', "SET ROLE $role; SELECT df.signal('$holder', 'go', '{}')");
is( $node->safe_psql('postgres', "SET ROLE $role; SELECT df.await_instance('$holder', 60)"),
	'completed', 'stuck: the holder completed too');
engine_clean('stuck');

# retention (with reconciliation, every 2 s) forgets the keys nobody uses
ok(query_until($node, "SELECT count(*) = 0 FROM df_internal.limits"),
	'retention: the idle keys are forgotten');

done_testing();

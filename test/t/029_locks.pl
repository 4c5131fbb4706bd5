# Keyed locks.  1. 20 instances take the keys {A,B} and 20 take
# {B,A} at once on 4 executors: all complete (no deadlock), their steps under
# the lock never overlap in time (each records when it entered and left,
# from the clock, and the release commits with the step), and the fencing
# tokens grow in the order the holders entered.  2. The executor running
# the step of a lock holder is killed (SIGKILL) while another instance waits
# for the key: after recovery the holder's step runs again (still holding
# the key), then the waiter gets the key; every effect exists once and
# nothing is left in the lock tables.
use strict;
use warnings;
use FindBin;
use lib "$FindBin::RealBin/../perl";
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use PgDurableTest;

my $workers = 4;
my $node = engine_node('locks', $workers);

$node->safe_psql('postgres', q{
CREATE TABLE spans (instance_id text NOT NULL, token bigint NOT NULL,
                    t0 timestamptz NOT NULL, t1 timestamptz NOT NULL);
CREATE FUNCTION lock_span(iid text, token bigint) RETURNS int LANGUAGE plpgsql AS $$
DECLARE
	t0 timestamptz := clock_timestamp();
BEGIN
	PERFORM pg_sleep(0.01);
	INSERT INTO spans VALUES (iid, token, t0, clock_timestamp());
	RETURN 1;
END
$$;
GRANT INSERT, SELECT ON spans TO df_user;
GRANT EXECUTE ON FUNCTION lock_span(text, bigint) TO df_user;
});

# 1. {A,B} and {B,A}, concurrently
my @sql;
for my $i (1 .. 20)
{
	for my $keys ("ARRAY['A','B']", "ARRAY['B','A']")
	{
		push @sql,
		  "SELECT df.start(df.with_lock('SELECT lock_span(''{sys_instance_id}'', \$lock.token)', $keys));";
	}
}
# started from two sessions at once, so that the starts interleave
my $s1 = $node->background_psql('postgres');
my $s2 = $node->background_psql('postgres');
$s1->query_safe('SET ROLE df_user');
$s2->query_safe('SET ROLE df_user');
for my $i (0 .. $#sql)
{
	($i % 2 ? $s2 : $s1)->query_safe($sql[$i]);
}
$s1->quit;
$s2->quit;

wait_instances_done($node, 'A-B / B-A');
is($node->safe_psql('postgres',
		"SELECT status, count(*) FROM df.instances GROUP BY status ORDER BY status"),
	'completed|40', 'all 40 instances completed: no deadlock');
is($node->safe_psql('postgres', 'SELECT count(*) FROM spans'), '40', 'each step ran once');
is($node->safe_psql('postgres', q{
SELECT count(*) FROM spans a JOIN spans b
  ON a.instance_id < b.instance_id AND a.t0 < b.t1 AND b.t0 < a.t1}),
	'0', 'no two steps held the keys at the same time');
is($node->safe_psql('postgres', q{
SELECT count(*) FROM (SELECT token, lag(token) OVER (ORDER BY t0) AS prev FROM spans) s
WHERE token <= prev}),
	'0', 'fencing tokens grow in the order the holders entered');
is($node->safe_psql('postgres',
		'SELECT (SELECT count(*) FROM df_internal.locks) + (SELECT count(*) FROM df_internal.lock_keys)'),
	'0', 'no lock left behind');

# 1b. chains of three locks of one key each, all the same key C: a take
# that makes the key's row and a release in the same transaction (one
# statement each) meet waiters queued in other transactions and in the
# same batch
$node->safe_psql('postgres', 'TRUNCATE spans');
my $one = "df.with_lock('SELECT lock_span(''{sys_instance_id}'', \$lock.token)', ARRAY['C'])";
my $s3 = $node->background_psql('postgres');
my $s4 = $node->background_psql('postgres');
$s3->query_safe('SET ROLE df_user');
$s4->query_safe('SET ROLE df_user');
for my $i (1 .. 30)
{
	($i % 2 ? $s4 : $s3)->query_safe("SELECT df.start($one ~> $one ~> $one);");
}
$s3->quit;
$s4->quit;
wait_instances_done($node, 'one key C');
is($node->safe_psql('postgres',
		"SELECT status, count(*) FROM df.instances GROUP BY status ORDER BY status"),
	'completed|70', 'the 30 chains on key C completed too');
is($node->safe_psql('postgres', 'SELECT count(*), count(DISTINCT token) FROM spans'),
	'90|90', 'each of the 90 steps ran once, each with a token of its own');
is($node->safe_psql('postgres', q{
SELECT count(*) FROM spans a JOIN spans b
  ON (a.instance_id, a.token) < (b.instance_id, b.token) AND a.t0 < b.t1 AND b.t0 < a.t1}),
	'0', 'no two steps held C at the same time');
is($node->safe_psql('postgres', q{
SELECT count(*) FROM (SELECT token, lag(token) OVER (ORDER BY t0) AS prev FROM spans) s
WHERE token <= prev}),
	'0', 'the tokens of C grow in the order its holders entered');
is($node->safe_psql('postgres', q{
SELECT (SELECT count(*) FROM df_internal.locks) + (SELECT count(*) FROM df_internal.lock_keys)
     + (SELECT count(*) FROM df.check())}),
	'0', 'no lock of C left behind and df.check finds nothing');

# 2. SIGKILL of the executor inside the step of a holder
my $holder = start_instance($node,
	sprintf("df.with_lock('%s', '{K}')", step_sql('x1', 3)), 'x1');
ok(query_until($node,
	"SELECT EXISTS (SELECT 1 FROM df_internal.locks WHERE instance_id = '$holder' AND held)"),
	'the holder holds K');
my $waiter = start_instance($node,
	sprintf("df.with_lock('%s', '{K}')", step_sql('y1', 0)), 'y1');
ok(query_until($node,
	"SELECT EXISTS (SELECT 1 FROM df_internal.locks WHERE instance_id = '$waiter' AND NOT held)"),
	'the waiter waits for K');
my $pid = executor_pid_in_step($node, "%''x1''%");
my $offset = -s $node->logfile;
ok(kill('KILL', $pid), "SIGKILL executor $pid inside the holder's step");
$node->wait_for_log(qr/all server processes terminated; reinitializing/, $offset);
wait_engine_ready($node, $workers);
is($node->safe_psql('postgres',
		"SELECT held FROM df_internal.locks WHERE instance_id = '$holder'"),
	't', 'after recovery the holder still holds K');
wait_instances_done($node, 'after the crash');
check_effects($node, 72);
is($node->safe_psql('postgres', q{
SELECT (SELECT at FROM effects WHERE step = 'y1') > (SELECT at FROM effects WHERE step = 'x1')}),
	't', 'the waiter ran after the holder');
is($node->safe_psql('postgres', q{
SELECT (SELECT count(*) FROM df_internal.locks) + (SELECT count(*) FROM df_internal.lock_keys)
     + (SELECT count(*) FROM df.check())}),
	'0', 'no lock left behind and df.check finds nothing');
check_engine_empty($node);

$node->stop('fast');
done_testing();

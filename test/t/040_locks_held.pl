# Keyed locks held in memory by a batch (store/lock_keys.c):
# an exclusive key nobody has is taken by an executor's batch without a
# row, under the key's advisory lock, and written as rows only when the
# batch commits with the key still held.
#
# 1. 20 chains of five steps, each under a key of its own (no contention):
#    all complete, every step runs once with a token of its own, and every
#    key is free again at the end.  How many key rows the takes held in
#    memory saved is a figure of the benchmark, not of this test: the table
#    statistics count rolled-back inserts too.
# 2. One key H, taken in memory by short holders and held across commits by
#    holders that sleep under it (df.sleep), at once on 4 executors: every
#    instance completes, the steps under H never overlap in time, tokens
#    grow in the order the holders entered, nothing is left.
# 3. A step under a key held in memory fails: the instance fails, and the
#    key is free again (the next instance takes it); df.check() is clean.
use strict;
use warnings;
use FindBin;
use lib "$FindBin::RealBin/../perl";
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use PgDurableTest;

my $workers = 4;
my $node = engine_node('locks_held', $workers);

$node->safe_psql('postgres', q{
CREATE TABLE spans (instance_id text NOT NULL, key text NOT NULL, token bigint NOT NULL,
                    t0 timestamptz NOT NULL, t1 timestamptz NOT NULL);
CREATE FUNCTION lock_span(iid text, key text, token bigint) RETURNS int LANGUAGE plpgsql AS $$
DECLARE
	t0 timestamptz := clock_timestamp();
BEGIN
	PERFORM pg_sleep(0.002);
	INSERT INTO spans VALUES (iid, key, token, t0, clock_timestamp());
	RETURN 1;
END
$$;
GRANT INSERT, SELECT ON spans TO df_user;
GRANT EXECUTE ON FUNCTION lock_span(text, text, bigint) TO df_user;
});

sub span_step
{
	my ($key) = @_;
	return "'SELECT lock_span(''{sys_instance_id}'', ''$key'', \$lock.token)'";
}

# 1. no contention
my $chain = join(' ~> ',
	map { "df.with_lock(" . span_step("own") . ", ARRAY['{sys_instance_id}:$_'])" } 1 .. 5);
$node->safe_psql('postgres',
	"SET ROLE df_user; SELECT count(df.start($chain)) FROM generate_series(1, 20)");
wait_instances_done($node, 'own keys');
is($node->safe_psql('postgres',
		"SELECT status, count(*) FROM df.instances GROUP BY status ORDER BY status"),
	'completed|20', 'the 20 chains completed');
is($node->safe_psql('postgres', 'SELECT count(*), count(DISTINCT token) FROM spans'),
	'100|100', 'each of the 100 steps ran once, each with a token of its own');
is($node->safe_psql('postgres',
		'SELECT (SELECT count(*) FROM df_internal.lock_keys) || '
		  . "'|' || (SELECT count(*) FROM df_internal.locks)"),
	'0|0', 'every key is free again and has no row');

# 2. one key, in memory and across commits
$node->safe_psql('postgres', 'TRUNCATE spans');
my $short = "df.with_lock(" . span_step("H") . ", ARRAY['H'])";
my $long = "df.with_lock(df.sleep(0) ~> " . span_step("H") . ", ARRAY['H'])";
start_interleaved($node,
	map { $_ % 5 == 0 ? "$long ~> $short" : "$short ~> $short" } 1 .. 30);
wait_instances_done($node, 'one key H');
is($node->safe_psql('postgres',
		"SELECT status, count(*) FROM df.instances GROUP BY status ORDER BY status"),
	'completed|50', 'the 30 chains on key H completed too');
is($node->safe_psql('postgres', 'SELECT count(*), count(DISTINCT token) FROM spans'),
	'60|60', 'each of the 60 steps under H ran once, each with a token of its own');
is($node->safe_psql('postgres', q{
SELECT count(*) FROM spans a JOIN spans b
  ON (a.instance_id, a.token) < (b.instance_id, b.token) AND a.t0 < b.t1 AND b.t0 < a.t1}),
	'0', 'no two steps held H at the same time');
is($node->safe_psql('postgres', q{
SELECT count(*) FROM (SELECT token, lag(token) OVER (ORDER BY t0) AS prev FROM spans) s
WHERE token <= prev}),
	'0', 'the tokens of H grow in the order its holders entered');

# 3. a failing step under a key held in memory
my $failed = $node->safe_psql('postgres',
	"SET ROLE df_user; SELECT df.start(df.with_lock('SELECT 1/0', ARRAY['F']))");
wait_instances_done($node, 'failing step');
is($node->safe_psql('postgres', "SELECT status FROM df.instances WHERE id = '$failed'"),
	'failed', 'the instance whose step failed under F failed');
my $next = $node->safe_psql('postgres',
	"SET ROLE df_user; SELECT df.start(df.with_lock(" . span_step("F") . ", ARRAY['F']))");
wait_instances_done($node, 'after the failure');
is($node->safe_psql('postgres', "SELECT status FROM df.instances WHERE id = '$next'"),
	'completed', 'the next instance took F');
is($node->safe_psql('postgres', q{
SELECT (SELECT count(*) FROM df_internal.locks) + (SELECT count(*) FROM df_internal.lock_keys)
     + (SELECT count(*) FROM df.check())}),
	'0', 'no lock left behind and df.check finds nothing');
unlike(slurp_file($node->logfile), qr/held in memory were not written/,
	'no commit found a key held in memory unwritten');
check_engine_empty($node);

$node->stop('fast');
done_testing();

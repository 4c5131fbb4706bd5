# Limit slots given in memory by a batch (store/limit_slots.c):
# while an executor's batch holds a key's row and the key had no waiters,
# it gives slots without writing holder rows, and writes a slot as its row
# only when the batch commits with it still held.
#
# 1. 20 chains of five steps, each under a df.limit of a key of its own (no
#    contention): all complete, every step runs once, every key is made
#    once and left free, nobody is queued and df.check() is clean.  How many
#    holder rows the slots given in memory saved is a figure of the
#    benchmark, not of this test: the table statistics count rolled-back
#    inserts too, so a count of written rows is no assertion.
# 2. One key of max_concurrent 2, entered by short steps given slots in
#    memory and by steps that hold their slot across commits (df.sleep
#    under the limit), from 30 chains on 4 executors: every instance
#    completes, never more than 2 steps are inside at once (each records
#    when it entered and left), nothing is left, df.check() is clean.
use strict;
use warnings;
use FindBin;
use lib "$FindBin::RealBin/../perl";
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use PgDurableTest;

my $workers = 4;
my $node = engine_node('limits_held', $workers);

$node->safe_psql('postgres', q{
CREATE TABLE spans (instance_id text NOT NULL, t0 timestamptz NOT NULL, t1 timestamptz NOT NULL);
CREATE FUNCTION limit_span(iid text) RETURNS int LANGUAGE plpgsql AS $$
DECLARE
	t0 timestamptz := clock_timestamp();
BEGIN
	PERFORM pg_sleep(0.002);
	INSERT INTO spans VALUES (iid, t0, clock_timestamp());
	RETURN 1;
END
$$;
GRANT INSERT, SELECT ON spans TO df_user;
GRANT EXECUTE ON FUNCTION limit_span(text) TO df_user;
});

my $span = "'SELECT limit_span(''{sys_instance_id}'')'";

# 1. a key per instance
my $chain = join(' ~> ', map { "df.limit($span, '{sys_instance_id}', 2)" } 1 .. 5);
$node->safe_psql('postgres',
	"SET ROLE df_user; SELECT count(df.start($chain)) FROM generate_series(1, 20)");
wait_instances_done($node, 'own keys');
is($node->safe_psql('postgres',
		"SELECT status, count(*) FROM df.instances GROUP BY status ORDER BY status"),
	'completed|20', 'the 20 chains completed');
is($node->safe_psql('postgres', 'SELECT count(*) FROM spans'), '100', 'each of the 100 steps ran once');
is($node->safe_psql('postgres', q{
SELECT count(*) FILTER (WHERE key ~ '(^|/)[0-9a-f]{8}$') FROM df_internal.limits}),
	'20', 'each chain made its key once');
is($node->safe_psql('postgres',
		'SELECT (SELECT count(*) FROM df_internal.limit_holders) || '
		  . "'|' || (SELECT count(*) FROM df_internal.limit_waiters)"),
	'0|0', 'no slot is held and nobody is queued once they ended');

# 2. one key of two slots, in memory and across commits
$node->safe_psql('postgres', 'TRUNCATE spans');
my $short = "df.limit($span, 'two', 2)";
my $long = "df.limit(df.sleep(0) ~> $span, 'two', 2)";
start_interleaved($node,
	map { $_ % 5 == 0 ? "$long ~> $short ~> $short" : "$short ~> $short ~> $short" } 1 .. 30);
wait_instances_done($node, 'one key of two slots');
is($node->safe_psql('postgres',
		"SELECT status, count(*) FROM df.instances GROUP BY status ORDER BY status"),
	'completed|50', 'the 30 chains under the key completed too');
is($node->safe_psql('postgres', 'SELECT count(*) FROM spans'), '90',
	'each of the 90 steps under the key ran once');
my $most = $node->safe_psql('postgres', q{
SELECT max((SELECT count(*) FROM spans b WHERE b.t0 <= a.t0 AND a.t0 < b.t1)) FROM spans a});
cmp_ok($most, '<=', 2, "never more than 2 steps inside at once ($most seen)");
is($node->safe_psql('postgres', q{
SELECT (SELECT count(*) FROM df_internal.limit_holders) + (SELECT count(*) FROM df_internal.limit_waiters)
     + (SELECT count(*) FROM df.check())}),
	'0', 'no slot or queue place left behind and df.check finds nothing');
unlike(slurp_file($node->logfile), qr/given in memory were not written/,
	'no commit found a slot given in memory unwritten');
check_engine_empty($node);

$node->stop('fast');
done_testing();

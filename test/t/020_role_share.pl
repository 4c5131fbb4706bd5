# The per-role share of the executors, pg_durable.max_executors_per_role:
# without it one role's long steps would occupy every executor, and
# another role's one-step workflow would wait until one of them ended.
#
# Role df_user (A) starts 6 one-step workflows whose steps block on an
# advisory lock the test holds, so they stay running for as long as the test
# wants, on 4 executors with a share of 2 per role.  Then:
#   - exactly 2 of A's steps run (wait on the lock); the other 4 wait in the
#     queue without being retried;
#   - role tenant_b's one-step workflow, and one started with
#     transaction_mode => 'new', complete while A's steps still run; without
#     the share A would hold all 4 executors and B would never complete here;
#   - the 4 executors all still run, and no admission slot is left taken;
#   - once the lock is released, every one of A's steps runs exactly once.
# Then a share of 0 (after a reload) lets A's steps take every executor, and
# pg_durable.max_user_connections = 2 (after a restart) lets two SQL steps
# of any roles run while the other executors run the rest.
use strict;
use warnings;
use FindBin;
use lib "$FindBin::RealBin/../perl";
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use PgDurableTest;

my $GATE = 4242;
my $node = engine_node('role_share', 4, "pg_durable.max_executors_per_role = 2\n");
$node->safe_psql('postgres', q{
CREATE ROLE tenant_b LOGIN;
SELECT df.grant_usage('tenant_b');
GRANT INSERT, SELECT ON effects TO tenant_b;
});

# How many steps wait for the gate (each one occupies an executor).
sub gate_waiters
{
	return "(SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' "
	  . "AND objid = $GATE AND objsubid = 1 AND NOT granted)";
}

my $gated = "INSERT INTO effects (instance_id, step) "
  . "SELECT ''{sys_instance_id}'', ''a'' FROM pg_advisory_xact_lock_shared($GATE)";

my $gate = $node->background_psql('postgres');
$gate->query_safe("SELECT pg_advisory_lock($GATE)");

my @a;
push @a, start_instance($node, "'$gated'", 'a') for 1 .. 6;
ok(query_until($node, 'SELECT ' . gate_waiters() . ' = 2'),
	"two of A's steps run, blocked on the gate");
# (the claims of the two running steps are not committed: all 6 rows show)
ok( query_until($node, qq{
SELECT count(*) = 6 FROM df_internal.tasks WHERE kind = 'step'
AND instance_id IN (@{[ join ', ', map { "'$_'" } @a ]})}),
	"every instance of A started; its four other steps wait in the queue");
is($node->safe_psql('postgres', 'SELECT ' . gate_waiters()), '2',
	"and still only two of A's steps run");

# B's workflows, while A's steps run
my $b = $node->safe_psql('postgres', q{
SET ROLE tenant_b;
SELECT df.start('INSERT INTO effects (instance_id, step) SELECT ''{sys_instance_id}'', ''b''');});
$node->safe_psql('postgres', "INSERT INTO expected VALUES ('$b', 'b')");
my $bnew = $node->safe_psql('postgres', q{
SET ROLE tenant_b;
SELECT df.start('INSERT INTO effects (instance_id, step) SELECT ''{sys_instance_id}'', ''b''',
                transaction_mode => 'new');});
$node->safe_psql('postgres', "INSERT INTO expected VALUES ('$bnew', 'b')");
ok( query_until($node,
		"SELECT count(*) = 2 FROM df.instances WHERE id IN ('$b', '$bnew') AND status = 'completed'"),
	"B's workflows complete while A holds its share");

is( $node->safe_psql('postgres', 'SELECT ' . gate_waiters() . q{,
  (SELECT count(*) FROM effects WHERE step = 'a'),
  (SELECT count(*) FROM df.instances WHERE status = 'running'),
  (SELECT count(*) FROM df_internal.tasks WHERE kind = 'step'),
  (SELECT coalesce(max(attempts), 0) FROM df_internal.tasks)}),
	'2|0|6|6|0',
	"meanwhile A's steps are still blocked (2 running, 4 queued, never retried)");
is( $node->safe_psql('postgres', qq{
SELECT string_agg(DISTINCT n.status, ',') FROM df.instances i
CROSS JOIN LATERAL df.instance_nodes(i.id) n
WHERE i.id IN (@{[ join ', ', map { "'$_'" } @a ]})}),
	'running', "df.instance_nodes shows A's steps running, as any step waiting for an executor");
is($node->safe_psql('postgres', 'SELECT count(*) FROM df.check()'),
	'0', 'df.check() sees nothing wrong with the waiting steps');
is( $node->safe_psql('postgres', q{
SELECT (SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'pg_durable executor'),
       df_internal.admission_slots_held()}),
	'4|0',
	'all 4 executors run, no admission slot is taken');

$gate->query_safe("SELECT pg_advisory_unlock($GATE)");
ok(wait_instances_done($node, 'after the gate opens'), "all of A's steps ran");
check_effects($node, 8);
is( $node->safe_psql('postgres',
		"SELECT count(*) FROM df_internal.events WHERE kind = 'step_retried'"),
	'0', 'no step was retried');

# no share: A's steps take every executor
$node->safe_psql('postgres', q{
ALTER SYSTEM SET pg_durable.max_executors_per_role = 0;
SELECT pg_reload_conf();});
$gate->query_safe("SELECT pg_advisory_lock($GATE)");
my @more;
push @more, start_instance($node, "'$gated'", 'a') for 1 .. 6;
ok(query_until($node, 'SELECT ' . gate_waiters() . ' = 4'),
	'with no share, A takes all 4 executors');
$gate->query_safe("SELECT pg_advisory_unlock($GATE)");
ok(wait_instances_done($node, 'without a share'), 'and its steps all run');
check_effects($node, 14);
$gate->quit;

# pg_durable.max_user_connections bounds the SQL steps of every role
# together: 2 of 4 executors run steps, the others still run the rest
$node->append_conf('postgresql.conf', "pg_durable.max_user_connections = 2\n");
$node->restart;
$gate = $node->background_psql('postgres');
$gate->query_safe("SELECT pg_advisory_lock($GATE)");
my @capped;
push @capped, start_instance($node, "'$gated'", 'a') for 1 .. 4;
ok(query_until($node, 'SELECT ' . gate_waiters() . ' = 2'),
	'max_user_connections = 2: two SQL steps run');
my $sleeper = $node->safe_psql('postgres', q{
SET ROLE tenant_b;
SELECT df.start(df.sleep(0))});
ok(query_until($node, "SELECT df.status('$sleeper') = 'completed'"),
	'a workflow without SQL steps completes meanwhile');
is($node->safe_psql('postgres', 'SELECT ' . gate_waiters()), '2',
	'and still only two SQL steps run');
$gate->query_safe("SELECT pg_advisory_unlock($GATE)");
ok(wait_instances_done($node, 'under max_user_connections'), 'then every step runs');
is( $node->safe_psql('postgres', qq{
SELECT count(*) FROM effects WHERE instance_id IN (@{[ join ', ', map { "'$_'" } @capped ]})}),
	'4', 'each of the capped steps once');
$gate->quit;

check_engine_empty($node);
$node->stop;
done_testing();

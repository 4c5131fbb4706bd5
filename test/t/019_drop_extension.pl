# DROP EXTENSION pg_durable while instances run: the drop must not
# wait on the executors nor deadlock with them.  It completes within a
# deadline, the server log has no "deadlock detected", and after CREATE
# EXTENSION again new workflows run.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time usleep);
use FindBin;
use lib "$FindBin::Bin/../perl";
use PgDurableTest;

my $node = engine_node('drop_extension', 2);
my $role = $PgDurableTest::ROLE;

$node->safe_psql('postgres', "SELECT df.grant_usage('$role')");

# Instances of every kind of work: steps that sleep (an executor inside a
# step), a JOIN of steps, timers and a SIGNAL wait, plus a queue of them
# waiting for an executor.
sub start_load
{
	my @ids;
	for my $i (1 .. 6)
	{
		push @ids, start_instance($node,
			sprintf("df.seq(df.join('%s', '%s'), '%s')",
				step_sql("a$i", 1), step_sql("b$i", 1), step_sql("c$i", 0.2)), "a$i", "b$i", "c$i");
		push @ids, start_instance($node,
			sprintf("df.seq(df.sleep(1), '%s')", step_sql("d$i", 0.2)), "d$i");
		push @ids, start_instance($node,
			"df.seq(df.wait_for_signal('go', 60), 'SELECT 1')", "none$i");
	}
	return @ids;
}

start_load();
# an executor is inside a step
executor_pid_in_step($node, '%effects%');

my $offset = -s $node->logfile;
my $t0 = time();
my ($ret, $out, $err) = $node->psql('postgres', 'DROP EXTENSION pg_durable CASCADE',
	timeout => 60);
my $took = time() - $t0;
is($ret, 0, 'DROP EXTENSION succeeded') or diag $err;
cmp_ok($took, '<', 20, sprintf('DROP EXTENSION took %.1f s (under 20 s)', $took));

# the executors notice the drop and keep quiet; give them time to misbehave
ok( query_until($node,
		"SELECT count(*) = 2 FROM pg_stat_activity WHERE backend_type = 'pg_durable executor' "
		  . "AND wait_event = 'Extension'"),
	'the executors wait for the extension');
my $log = slurp_file($node->logfile, $offset);
unlike($log, qr/deadlock detected/, 'no deadlock in the log');
unlike($log, qr/PANIC|server process .* was terminated/, 'no crash in the log');

# the extension again: new workflows run
$node->safe_psql('postgres', qq{
CREATE EXTENSION pg_durable;
GRANT USAGE ON SCHEMA df TO $role;
GRANT SELECT ON df.instances, df.nodes TO $role;
SELECT df.grant_usage('$role');
TRUNCATE effects, expected;
});
wait_engine_ready($node, 2);
my $id = start_instance($node, sprintf("df.seq('%s', '%s')", step_sql('n1', 0.1),
	step_sql('n2', 0.1)), 'n1', 'n2');
wait_instances_done($node, 'after CREATE EXTENSION');
is($node->safe_psql('postgres', "SELECT status FROM df.instances WHERE id = '$id'"),
	'completed', 'a new workflow completed');
check_effects($node, 1);

$node->stop;
done_testing();

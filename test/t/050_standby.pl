# A hot standby and its promotion (docs/operations/high-availability.md):
#  1. On the standby no pg_durable worker runs and none is logged: the
#     launcher is a background worker that starts when recovery ends.
#  2. The monitoring functions and views read the replicated tables;
#     df.check() says "standby" and nothing else.
#  3. Every writing function fails with one error: SQLSTATE 25006,
#     "cannot <action> on a standby server", a hint to connect to the
#     primary.
#  4. Promoted, the standby starts its workers and resumes the instances
#     from the tables: a signal wait takes the signal sent on it, a timer
#     due during the outage fires, an HTTP call in flight on the lost
#     primary is made again at once with the same Idempotency-Key.
#  5. While transactions start read-only (default_transaction_read_only, as
#     pg_auto_failover keeps a promoted standby for a few seconds) no step
#     is claimed, so none fails; then the instance completes.
#  6. pg_ctl stop -m fast with an executor in a step running pg_sleep(600)
#     and the HTTP worker in a call that hangs returns in seconds (the time
#     is reported, not asserted); at the next start both resume.
use strict;
use warnings;
use FindBin;
use lib "$FindBin::RealBin/../perl";
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time usleep);
use HTTP::Tiny;
use PgDurableTest;

my $base = start_http_server();
my ($primary, $standby) =
  engine_pair('standby', 2, "pg_durable.http_allow_private = on\nlog_min_messages = log\n");
$primary->safe_psql('postgres', q{
SELECT df.grant_usage('df_user', include_http => true);
SELECT df.create_circuit_breaker('svc');
SELECT df.create_limit('lim', 2);
SELECT df.create_lock_space('space');
SELECT df.create_topic('topic');
});

sub effect { return "'" . step_sql($_[0], 0) . "'"; }

# Wait (with a deadline) until the test server has received $n requests for $path.
sub wait_requests
{
	my ($path, $n) = @_;
	for (my $i = 0; $i < 600; $i++)
	{
		my $log = http_get($base, "/log?path=$path");
		return $log if @$log >= $n;
		usleep(100_000);
	}
	die "the test server did not receive $n requests for $path";
}

# --- on the primary ----------------------------------------------------------
my $done = start_instance($primary, effect('d1'), 'd1');
my $waiting = start_instance($primary,
	"df.wait_for_signal('go') ~> " . effect('w1'), 'w1');
ok( query_until($primary,
		"SELECT df.status('$done') = 'completed' AND "
		  . "EXISTS (SELECT FROM df_internal.waits WHERE instance_id = '$waiting')"),
	'on the primary: one instance completed, one waits for a signal');
$primary->wait_for_catchup($standby);

# --- 1. no worker on the standby -------------------------------------------
my $standby_log_start = -s $standby->logfile;
is( $standby->safe_psql('postgres',
		"SELECT count(*) FROM pg_stat_activity WHERE backend_type LIKE 'pg_durable%'"),
	'0', 'no pg_durable worker runs on the standby');
is( $standby->safe_psql('postgres', 'SELECT pg_is_in_recovery()'),
	't', 'the standby is in recovery');

# --- 2. reads ----------------------------------------------------------------
my @reads = (
	[ "SELECT df.status('$done')", 'completed' ],
	[ "SELECT df.status('$waiting')", 'running' ],
	[ "SELECT df.result('$done') IS NOT NULL", 't' ],
	[ "SELECT count(*) >= 2 FROM df.list_instances()", 't' ],
	[ "SELECT count(*) > 0 FROM df.instance_nodes('$waiting')", 't' ],
	[ "SELECT count(*) = 1 FROM df.instance_info('$waiting')", 't' ],
	[ "SELECT count(*) > 0 FROM df.instance_executions('$done')", 't' ],
	[ "SELECT count(*) > 0 FROM df.history('$done')", 't' ],
	[ "SELECT length(df.explain('$waiting')) > 0", 't' ],
	[ "SELECT count(*) > 0 FROM df.timeline('$done')", 't' ],
	[ "SELECT count(*) > 0 FROM df.instance_spans('$done')", 't' ],
	[ "SELECT count(*) FROM df.compensations('$done')", '0' ],
	[ "SELECT total_instances >= 2 FROM df.metrics()", 't' ],
	[ "SELECT df.await_instance('$done', 1)", 'completed' ],
	[ "SELECT count(*) >= 0 FROM df.circuit_breaker_states()", 't' ],
	[ "SELECT count(*) FROM df.shared_objects", '4' ],
	[ "SELECT count(*) >= 0 FROM df.locks", 't' ],
	[ "SELECT count(*) >= 0 FROM df.limits", 't' ],
	[ "SELECT count(*) >= 0 FROM df.limit_queue", 't' ],
	[ "SELECT count(*) >= 0 FROM df.circuit_breakers", 't' ],
	[ "SELECT count(*) >= 0 FROM df.circuit_breaker_history", 't' ],
	[ "SELECT count(*) >= 0 FROM df.subscriptions", 't' ],
	[ "SELECT df.getvar('nothing') IS NULL", 't' ],
	[ "SELECT string_agg(problem, ',') FROM df.check()", 'standby' ]);
for my $r (@reads)
{
	my ($sql, $want) = @$r;
	my ($ret, $out, $err) = $standby->psql('postgres', $sql);
	is("$ret $out", "0 $want", "on the standby: $sql") or diag $err;
}

# --- 3. writes ---------------------------------------------------------------
my @writes = (
	[ "df.start('SELECT 1')", 'start a workflow' ],
	[ "df.signal('$waiting', 'go', '{}')", 'send a signal' ],
	[ "df.cancel('$waiting', 'no')", 'cancel an instance' ],
	[ "df.compensate('$done')", 'compensate an instance' ],
	[ "df.publish_event('topic', '{}')", 'publish an event' ],
	[ "df.subscribe('s', 'topic', 'SELECT 1')", 'subscribe to a topic' ],
	[ "df.unsubscribe('s')", 'drop a subscription' ],
	[ "df.setvar('a', 'b')", 'change workflow variables' ],
	[ "df.unsetvar('a')", 'change workflow variables' ],
	[ "df.clearvars()", 'change workflow variables' ],
	[ "df.create_circuit_breaker('svc2')", 'create a circuit breaker' ],
	[ "df.drop_circuit_breaker('svc')", 'drop a circuit breaker' ],
	[ "df.reset_circuit_breaker('svc')", 'reset a circuit breaker' ],
	[ "df.create_limit('lim2', 1)", 'create a limit' ],
	[ "df.drop_limit('lim')", 'drop a limit' ],
	[ "df.create_lock_space('space2')", 'create a lock space' ],
	[ "df.drop_lock_space('space')", 'drop a lock space' ],
	[ "df.create_topic('topic2')", 'create a topic' ],
	[ "df.drop_topic('topic')", 'drop a topic' ],
	[ "df.grant_circuit_breaker('svc', 'df_user')", 'grant a circuit breaker' ],
	[ "df.revoke_circuit_breaker('svc', 'df_user')", 'revoke a circuit breaker' ],
	[ "df.grant_limit('lim', 'df_user')", 'grant a limit' ],
	[ "df.revoke_limit('lim', 'df_user')", 'revoke a limit' ],
	[ "df.grant_lock_space('space', 'df_user')", 'grant a lock space' ],
	[ "df.revoke_lock_space('space', 'df_user')", 'revoke a lock space' ],
	[ "df.grant_topic('topic', 'df_user')", 'grant a topic' ],
	[ "df.revoke_topic('topic', 'df_user')", 'revoke a topic' ],
	[ "df.grant_usage('df_user')", 'grant the use of pg_durable' ],
	[ "df.revoke_usage('df_user')", 'revoke the use of pg_durable' ],
	[ "df.resume_restored()", 'resume a restore' ]);
for my $w (@writes)
{
	my ($call, $action) = @$w;
	my ($fn) = $call =~ /^(df\.\w+)/;
	my ($ret, $out, $err) = $standby->psql('postgres',
		"\\set VERBOSITY verbose\nSELECT $call;");
	like($err,
		qr/ERROR:  25006: cannot \Q$action\E on a standby server\nDETAIL:  \Q$fn\E writes to the database.*\nHINT:  Connect to the primary, for example with target_session_attrs=read-write/s,
		"on the standby $fn is refused");
}
# as the role that starts workflows too
my ($ret, $out, $err) = $standby->psql('postgres', "SET ROLE df_user; SELECT df.start('SELECT 1');");
like($err, qr/cannot start a workflow on a standby server/, 'as df_user, df.start is refused');

# nothing of pg_durable was logged while the standby waited
my $log = slurp_file($standby->logfile, $standby_log_start);
unlike($log, qr/pg_durable (launcher|executor|http worker)/,
	'the standby logged nothing of pg_durable workers while in recovery');

# --- 4. promotion --------------------------------------------------------------
# a timer that falls due during the outage, and an HTTP call in flight when
# the primary is lost: its lease would hold the call for its 300 s timeout
# and 5 s more
start_instance($primary, 'df.sleep(1) ~> ' . effect('t1'), 't1');
start_instance($primary,
	"df.http('$base/delay/8000', 'GET', NULL, NULL, 300) ~> " . effect('h1'), 'h1');
wait_requests('/delay/8000', 1);
$primary->wait_for_catchup($standby);
$primary->stop('immediate');
usleep(1_500_000);
my $t0 = time();
my $promoted_at = -s $standby->logfile;
$standby->promote;
ok( query_until($standby,
		"SELECT count(*) = 2 FROM pg_stat_activity WHERE backend_type = 'pg_durable executor'"),
	'the promoted standby started its executors');
note sprintf('executors running %.2f s after pg_ctl promote', time() - $t0);
$standby->safe_psql('postgres', "SET ROLE df_user; SELECT df.signal('$waiting', 'go', '{}')");
$standby->wait_for_log(qr/pg_durable http worker makes 1 HTTP calls of a previous worker again/,
	$promoted_at);
wait_instances_done($standby, 'after the promotion');
my $calls = wait_requests('/delay/8000', 2);
is(scalar(@$calls), 2, 'the HTTP call in flight was made again');
is($calls->[0]{key}, $calls->[1]{key}, 'with the same Idempotency-Key');
check_effects($standby, 4);
check_df_clean($standby, 'the promotion');

# --- 5. read-only transactions after a promotion --------------------------------
# A failover manager (pg_auto_failover) keeps a promoted standby read-only
# until the old primary is known to be gone: no step is claimed meanwhile,
# so none fails on "cannot execute INSERT in a read-only transaction".
my $ro_log = -s $standby->logfile;
my $ro = start_instance($standby, 'df.sleep(1) ~> ' . effect('r1'), 'r1');
$standby->safe_psql('postgres', q{
ALTER SYSTEM SET default_transaction_read_only = on; SELECT pg_reload_conf()});
ok( query_until($standby,
		"SELECT count(*) > 0 AND bool_and(run_at < now() - interval '1 second') "
		  . "FROM df_internal.tasks WHERE instance_id = '$ro'"),
	'the step after the timer has been due for a second while transactions are read-only');
is( $standby->safe_psql('postgres', qq{
SELECT (df.status('$ro') IN ('pending', 'running')) || ' ' || (SELECT count(*) FROM effects WHERE instance_id = '$ro')
  || ' ' || (SELECT count(*) FROM df.nodes WHERE instance_id = '$ro' AND status = 'failed')}),
	'true 0 0', 'no step ran or failed while transactions were read-only');
unlike(slurp_file($standby->logfile, $ro_log), qr/in a read-only transaction/,
	'no executor tried to claim work in a read-only transaction');
$standby->safe_psql('postgres', q{
SET default_transaction_read_only = off;
ALTER SYSTEM RESET default_transaction_read_only; SELECT pg_reload_conf()});
wait_instances_done($standby, 'once transactions may write');
check_effects($standby, 5);

# --- 6. shutdown with a step in pg_sleep(600) and a call that hangs ------------
HTTP::Tiny->new->get("$base/fault/hung/hang")->{success} or die 'the test server refused /fault';
my ($sleeper, $hung) = split /\n/, $standby->safe_psql('postgres', qq{
SET ROLE df_user;
SELECT df.start('SELECT pg_sleep(600)');
SELECT df.start(df.http('$base/service/hung', 'GET', NULL, NULL, 300));});
executor_pid_in_step($standby, '%pg_sleep(600)%');
wait_requests('/service/hung', 1);
$t0 = time();
$standby->stop('fast');
my $stop_s = time() - $t0;
pass('pg_ctl stop -m fast returned with a step in pg_sleep(600) and a hung HTTP call');
note sprintf('pg_ctl stop -m fast took %.2f s', $stop_s);
$standby->start;
ok( query_until($standby,
		"SELECT count(*) = 1 FROM pg_stat_activity WHERE backend_type = 'pg_durable executor' "
		  . "AND query LIKE '%pg_sleep(600)%'"),
	'after the restart the step runs again');
wait_requests('/service/hung', 2);
$standby->safe_psql('postgres', qq{
SELECT df.cancel('$sleeper', 'test over'), df.cancel('$hung', 'test over')});
wait_instances_done($standby, 'after the cancels');
check_df_clean($standby, 'the cancels');
$standby->stop('fast');
done_testing();

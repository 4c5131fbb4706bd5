# A query cancel that reaches an executor outside a step's statement costs
# the engine a retry, never an error (CI, stop 40: an executor logged
# "canceling statement due to user request" for a df.instances UPDATE):
#
# - a step's attempt_timeout fires after the last interrupt check of its
#   statement (an AFTER trigger that hashes a long string in its RETURN):
#   the statement has finished, and the cancel that the timer sent the
#   executor goes with the timer.  Before, it stayed pending and cancelled
#   the engine's next statement, at every attempt: the instance never
#   completed, and each attempt logged an ERROR;
# - pg_cancel_backend() of an executor that waits for a runs row in engine
#   code (pg_durable.inbox = off, a session holds the row): its transaction
#   runs again at once, with a LOG line and no ERROR, and every step of the
#   instance runs once.
# - pg_cancel_backend() of every pg_durable process while it waits for
#   work (the launcher, the HTTP worker, the executor): each logs that it
#   ignored the cancel, and goes on (raised outside every error handler,
#   the cancel would end the process with exit code 1);
# - pg_cancel_backend() of the executor while its heartbeat waits for the
#   df._worker_epoch row a session holds: the heartbeat is rolled back with
#   a LOG line, the executor goes on and its next heartbeat is written.
# - pg_cancel_backend() of a step session of another database (df.start(…,
#   database => …)) while it waits for its executor's next step: it logs
#   that it ignored the cancel and later exits idle, without an error.
# df.check() is clean after each.
use strict;
use warnings;
use FindBin;
use lib "$FindBin::RealBin/../perl";
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(usleep);
use PgDurableTest;

my $ROLE = $PgDurableTest::ROLE;
my $node = engine_node('stray_cancel', 1, qq{
pg_durable.inbox = off
});

$node->safe_psql('postgres', qq{
CREATE TABLE cancel_effects (instance_id text NOT NULL, step text NOT NULL);
GRANT INSERT, SELECT ON cancel_effects TO $ROLE;
-- an insert into hashed ends with a trigger whose RETURN expression (a
-- PL/pgSQL simple expression: md5 of 80 MB, 48 times, about 6 s here)
-- checks for no interrupt, long past the timeout below; what comes before
-- it (80 MB built, the last check) takes a few tens of milliseconds, but
-- once took over 1 s in the PostgreSQL 17 chroot (scripts/run-in-trixie)
-- and over 2 s on a loaded machine: the timeout is 3 s
CREATE TABLE hashed (instance_id text NOT NULL);
GRANT INSERT ON hashed TO $ROLE;
CREATE FUNCTION hash_tail() RETURNS trigger LANGUAGE plpgsql AS \$\$
DECLARE
	b text := repeat(repeat('x', 10000), 8000);
BEGIN
	RETURN CASE WHEN md5(b) || md5(b) || md5(b) || md5(b) || md5(b) || md5(b) ||
		md5(b) || md5(b) || md5(b) || md5(b) || md5(b) || md5(b) ||
		md5(b) || md5(b) || md5(b) || md5(b) || md5(b) || md5(b) ||
		md5(b) || md5(b) || md5(b) || md5(b) || md5(b) || md5(b) ||
		md5(b) || md5(b) || md5(b) || md5(b) || md5(b) || md5(b) ||
		md5(b) || md5(b) || md5(b) || md5(b) || md5(b) || md5(b) ||
		md5(b) || md5(b) || md5(b) || md5(b) || md5(b) || md5(b) ||
		md5(b) || md5(b) || md5(b) || md5(b) || md5(b) || md5(b) IS NULL
		THEN NULL END;
END
\$\$;
CREATE TRIGGER hashed_tail AFTER INSERT ON hashed
	FOR EACH ROW EXECUTE FUNCTION hash_tail();
});

sub start
{
	my ($graph) = @_;
	my $id = $node->safe_psql('postgres', "SET ROLE $ROLE; SELECT df.start($graph)");
	die "df.start returned '$id'" unless $id =~ /^[0-9a-f]{8}$/;
	return $id;
}

sub eff
{
	my ($step) = @_;
	return "INSERT INTO cancel_effects VALUES (''{sys_instance_id}'', ''$step'') RETURNING step";
}

sub counts
{
	my ($id) = @_;
	return $node->safe_psql('postgres',
		"SELECT string_agg(step || '=' || n, ',' ORDER BY step) FROM "
		  . "(SELECT step, count(*) AS n FROM cancel_effects "
		  . "WHERE instance_id = '$id' GROUP BY step) s");
}

sub status_is
{
	my ($id, $status) = @_;
	return query_until($node,
		"SELECT status = '$status' FROM df.instances WHERE id = '$id'");
}

# The server log from byte $from on.
sub log_since
{
	my ($from) = @_;
	my $log = slurp_file($node->logfile);
	return substr($log, $from);
}

# Wait until the server log from byte $from on matches $re.
sub log_shows
{
	my ($from, $re) = @_;
	my $deadline = time() + $PostgreSQL::Test::Utils::timeout_default;
	while (time() < $deadline)
	{
		return 1 if log_since($from) =~ $re;
		usleep(50_000);
	}
	return 0;
}

# --- the attempt_timeout fires after the statement's last interrupt check ---
{
	my $from = -s $node->logfile;
	my $id = start("df.seq(df.retry('INSERT INTO hashed VALUES (''{sys_instance_id}'')', "
		  . "max_attempts => 1, attempt_timeout => '4 s'), '" . eff('after') . "')");
	ok(query_until($node,
			"SELECT status IN ('completed', 'failed', 'cancelled') FROM df.instances "
			  . "WHERE id = '$id'"),
		'the instance ends');
	is($node->safe_psql('postgres', "SELECT status FROM df.instances WHERE id = '$id'"),
		'completed', 'a step whose timeout fired after its last interrupt check completes')
	  or diag $node->safe_psql('postgres',
		"SELECT string_agg(id || ' ' || status || ' ' || coalesce(result::text, ''), E'\\n') "
		  . "FROM df.nodes WHERE instance_id = '$id'");
	is(counts($id), 'after=1', 'the step after it ran once');
	is($node->safe_psql('postgres', "SELECT count(*) FROM hashed WHERE instance_id = '$id'"),
		'1', 'the step that ran past its timeout committed once');
	my $took = $node->safe_psql('postgres', qq{
		SELECT round(extract(epoch FROM completed_at - created_at) * 1000)
		FROM df.instances WHERE id = '$id'});
	diag "instance $id ran for $took ms";
	unlike(log_since($from), qr/ERROR:/, 'no ERROR in the server log');
	check_df_clean($node, 'a timeout that fired late');
}

# --- pg_cancel_backend() of an executor waiting for a runs row ---------
{
	my $from = -s $node->logfile;
	my $holder = $node->background_psql('postgres');
	my $id = start("df.seq('SELECT pg_sleep(3), 1 AS s1', '" . eff('s2') . "')");
	my $pid = executor_pid_in_step($node, '%pg_sleep(3)%');

	# the runs row is free while the statement runs; the step then waits for it
	$holder->query_safe('BEGIN');
	is( $holder->query_safe(
			"SELECT count(*) FROM (SELECT FROM df_internal.runs "
			  . "WHERE instance_id = '$id' FOR UPDATE) r"),
		'1',
		'a session holds the runs row while the step runs');
	my $waiting = "SELECT count(*) = 1 FROM pg_locks l "
	  . "WHERE l.pid = $pid AND NOT l.granted "
	  . "AND l.waitstart < clock_timestamp() - interval '0.2 s'";
	ok(query_until($node, $waiting), 'the executor waits for the runs row');
	is($node->safe_psql('postgres', "SELECT pg_cancel_backend($pid)"),
		't', 'the executor is sent a cancel');
	ok(log_shows($from, qr/an engine transaction was interrupted/),
		'the executor logs that its transaction runs again');
	ok(query_until($node, $waiting), 'it waits for the runs row again');
	$holder->query_safe('COMMIT');
	$holder->quit;
	ok(status_is($id, 'completed'), 'the instance completes once the row is free');
	is(counts($id), 's2=1', 'the step after the interrupted one ran once');
	unlike(log_since($from), qr/ERROR:/, 'no ERROR in the server log');
	check_df_clean($node, 'a cancel in engine code');
}

# --- pg_cancel_backend() of the pg_durable processes waiting for work ----
{
	my $from = -s $node->logfile;
	my $procs = "SELECT string_agg(pid::text, ',' ORDER BY pid) FROM pg_stat_activity "
	  . "WHERE backend_type IN ('pg_durable launcher', 'pg_durable http worker', "
	  . "'pg_durable executor')";
	my $before = $node->safe_psql('postgres', $procs);
	my @pids = split /,/, $before;
	is(scalar(@pids), 3, 'a launcher, an HTTP worker and an executor run');
	is($node->safe_psql('postgres',
			"SELECT count(*) FILTER (WHERE pg_cancel_backend(pid)) FROM pg_stat_activity "
			  . "WHERE pid IN ($before)"),
		'3', 'each is sent a cancel');
	# each either waited for work (it ignores the cancel) or was in a unit
	# (the unit is rolled back: an executor's runs again at once); before,
	# the ones waiting for work logged the cancel as an ERROR and exited
	my $seen = 0;
	my $deadline = time() + $PostgreSQL::Test::Utils::timeout_default;
	while (time() < $deadline)
	{
		my $log = log_since($from);
		$seen = () = $log =~
		  /arrived between units of work and was ignored|was interrupted and runs again|canceling statement due to user request/g;
		last if $seen >= 3;
		usleep(50_000);
	}
	cmp_ok($seen, '>=', 3, 'each logs the cancel it got');
	my $id = start("'" . eff('after_idle') . "'");
	ok(status_is($id, 'completed'), 'a workflow started afterwards completes');
	is($node->safe_psql('postgres', $procs), $before, 'the same processes still run');
	unlike(log_since($from), qr/exited with exit code/, 'no process exit in the server log');
	like(log_since($from), qr/arrived between units of work and was ignored/,
		'a cancel between units is ignored');
}

# --- pg_cancel_backend() of the executor in its heartbeat ----------------
{
	my $from = -s $node->logfile;
	my $holder = $node->background_psql('postgres');
	$holder->query_safe('BEGIN');
	$holder->query_safe('SELECT count(*) FROM (SELECT FROM df._worker_epoch FOR UPDATE) e');
	my $locked_at = $holder->query_safe('SELECT clock_timestamp()');
	my $waiting = "SELECT pid FROM pg_stat_activity WHERE backend_type = 'pg_durable executor' "
	  . "AND query = 'pg_durable: heartbeat' AND wait_event_type = 'Lock'";
	my $pid = '';
	my $deadline = time() + $PostgreSQL::Test::Utils::timeout_default;
	while (time() < $deadline)
	{
		$pid = $node->safe_psql('postgres', $waiting);
		last if $pid =~ /^\d+$/;
		usleep(50_000);
	}
	like($pid, qr/^\d+$/, 'the heartbeat waits for the row a session holds');
	is($node->safe_psql('postgres', "SELECT pg_cancel_backend($pid)"),
		't', 'the executor is sent a cancel');
	ok(log_shows($from, qr/an engine transaction was interrupted and runs again/),
		'the executor logs that its heartbeat was interrupted');
	$holder->query_safe('COMMIT');
	$holder->quit;
	ok(query_until($node,
			"SELECT max(last_seen_at) > '$locked_at' FROM df._worker_epoch"),
		'a later heartbeat is written');
	is($node->safe_psql('postgres', "SELECT count(*) FROM pg_stat_activity WHERE pid = $pid"),
		'1', 'the executor still runs');
	my $id = start("'" . eff('after_heartbeat') . "'");
	ok(status_is($id, 'completed'), 'a workflow started afterwards completes');
	unlike(log_since($from), qr/ERROR:|exited with exit code/,
		'no ERROR and no process exit in the server log');
	check_df_clean($node, 'cancels between units and in the heartbeat');
}

# --- pg_cancel_backend() of an idle step session of another database -----
{
	$node->safe_psql('postgres', 'CREATE DATABASE cancel_other');
	$node->safe_psql('cancel_other',
		"CREATE TABLE t (id text); GRANT INSERT, SELECT ON t TO $ROLE");
	my $from = -s $node->logfile;
	my ($pid, $sent, $id) = ('', 'f', '');
	# the session waits 2 s for its executor's next step, then exits: when
	# the cancel comes too late for that, another round
	for my $round (1 .. 5)
	{
		$id = start("'INSERT INTO t VALUES (''{sys_instance_id}'') RETURNING id', "
			  . "database => 'cancel_other'");
		die "instance $id did not complete" unless status_is($id, 'completed');
		$pid = $node->safe_psql('postgres',
			"SELECT pid FROM pg_stat_activity WHERE backend_type = 'pg_durable session' "
			  . "AND datname = 'cancel_other'");
		next unless $pid =~ /^\d+$/;
		$sent = $node->safe_psql('postgres', "SELECT pg_cancel_backend($pid)");
		last if $sent eq 't';
	}
	is($sent, 't', 'an idle step session is sent a cancel');
	ok(log_shows($from,
			qr/pg_durable step session for PID \d+: a cancel request arrived between units of work and was ignored/),
		'it logs that it ignored the cancel');
	ok(query_until($node, "SELECT count(*) = 0 FROM pg_stat_activity WHERE pid = $pid"),
		'it exits once idle');
	unlike(log_since($from), qr/ERROR:|exited with exit code/,
		'no ERROR and no exit with an error in the server log');
	is($node->safe_psql('cancel_other', "SELECT count(*) FROM t WHERE id = '$id'"),
		'1', 'its step ran once');
	check_df_clean($node, 'a cancel of an idle step session');
}

$node->stop('fast');
done_testing();

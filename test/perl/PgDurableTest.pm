# Helpers shared by the engine's TAP tests (test/t/002_* and later): a
# cluster with pg_durable preloaded and the extension created in database
# "postgres", a LOGIN role that starts workflows, and waits that poll the
# server instead of sleeping for a fixed time.
package PgDurableTest;

use strict;
use warnings;
use Exporter 'import';
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use IPC::Run;
use Time::HiRes qw(usleep time);
use File::Basename qw(dirname);
use HTTP::Tiny;
use JSON::PP;

our @EXPORT = qw(
  engine_cluster engine_node engine_pair wait_engine_ready step_sql crash_shapes start_instance
  wait_instances_done executor_pid_in_step check_effects check_engine_empty
  check_df_clean
  start_server start_http_server http_get start_otlp_receiver
  query_until diag_engine executor_inserts start_interleaved
  map_kill_setup wait_executors_again kill_an_executor
);

# The role that starts workflows (superusers may not, by default).
our $ROLE = 'df_user';
# the database the helpers below look into (pg_durable.database)
our $DB = 'postgres';

# A running cluster with pg_durable preloaded and $workers executors
# configured, but no extension and no roles yet (a restore creates them).
# $extra_conf is appended to postgresql.conf.
sub engine_cluster
{
	my ($name, $workers, $extra_conf) = @_;
	my $node = PostgreSQL::Test::Cluster->new($name);

	$node->init;
	engine_conf($node, $workers, $extra_conf);
	$node->start;
	return $node;
}

# The settings of a node of the engine, appended to its postgresql.conf.
sub engine_conf
{
	my ($node, $workers, $extra_conf) = @_;
	$node->append_conf('postgresql.conf', qq{
shared_preload_libraries = 'pg_durable'
pg_durable.database = 'postgres'
pg_durable.workers = $workers
restart_after_crash = on
max_worker_processes = 16
log_min_messages = warning
} . ($extra_conf // '') . "\n" . ($ENV{PG_DURABLE_TEST_CONF} // ''));
	return;
}

# A running cluster with $workers executors and the extension ready.
# $extra_conf is appended to postgresql.conf.
sub engine_node
{
	my ($name, $workers, $extra_conf) = @_;
	my $node = engine_cluster($name, $workers, $extra_conf);

	engine_setup($node);
	wait_engine_ready($node, $workers);
	return $node;
}

# A primary with $workers executors and the extension ready, and a hot
# standby streaming from it (named "<name>_standby", the application_name
# synchronous_standby_names can name).  With $sync the primary waits for
# the standby to apply every commit (synchronous_commit = remote_apply).
sub engine_pair
{
	my ($name, $workers, $extra_conf, $sync) = @_;
	my $primary = PostgreSQL::Test::Cluster->new("${name}_primary");
	my $standby = PostgreSQL::Test::Cluster->new("${name}_standby");

	$primary->init(allows_streaming => 1);
	engine_conf($primary, $workers, $extra_conf);
	$primary->start;
	engine_setup($primary);
	wait_engine_ready($primary, $workers);
	$primary->backup('pair');
	$standby->init_from_backup($primary, 'pair', has_streaming => 1);
	$standby->start;
	$primary->wait_for_catchup($standby);
	if ($sync)
	{
		$primary->append_conf('postgresql.conf', qq{
synchronous_standby_names = '"${name}_standby"'
synchronous_commit = remote_apply
});
		$primary->reload;
		query_until($primary,
			"SELECT sync_state = 'sync' FROM pg_stat_replication WHERE application_name = '${name}_standby'")
		  or die "the standby did not become synchronous";
	}
	return ($primary, $standby);
}

# The extension, the role that starts workflows and the tables of effects.
sub engine_setup
{
	my ($node) = @_;
	$node->safe_psql('postgres', qq{
CREATE EXTENSION pg_durable;
CREATE ROLE $ROLE LOGIN;
GRANT USAGE ON SCHEMA df TO $ROLE;
GRANT SELECT ON df.instances, df.nodes TO $ROLE;
GRANT CREATE ON SCHEMA public TO $ROLE;
-- every effect of a step: one row per (instance, step), no unique key, so
-- that a step that ran twice shows up as two rows
CREATE TABLE effects (instance_id text NOT NULL, step text NOT NULL,
                      at timestamptz NOT NULL DEFAULT clock_timestamp());
GRANT INSERT, SELECT ON effects TO $ROLE;
-- what each instance must have done, written by the test when it starts one
CREATE TABLE expected (instance_id text NOT NULL, step text NOT NULL,
                       PRIMARY KEY (instance_id, step));
});
	return;
}

# Wait until the server accepts connections, $workers executors run and the
# engine has announced readiness.
sub wait_engine_ready
{
	my ($node, $workers) = @_;
	query_until($node,
		"SELECT count(*) = $workers FROM pg_stat_activity "
		  . "WHERE backend_type = 'pg_durable executor'")
	  or die "the executors did not start";
	query_until($node,
		"SELECT EXISTS (SELECT 1 FROM df_internal._worker_ready WHERE schema_version >= 1)")
	  or die "the engine did not announce readiness";
	return;
}

# Poll until $sql returns 't', for as long as poll_query_until would.  Unlike
# poll_query_until it passes the query with -c: while the server restarts
# after a crash, a psql that cannot connect exits before reading its stdin,
# and IPC::Run then dies on a broken pipe.
sub query_until
{
	my ($node, $sql) = @_;
	my $deadline = time() + $PostgreSQL::Test::Utils::timeout_default;
	while (time() < $deadline)
	{
		my ($out, $err) = ('', '');
		IPC::Run::run([ 'psql', '-XAtq', '-d', $node->connstr($DB), '-c', $sql ],
			'<', \undef, '>', \$out, '2>', \$err);
		chomp $out;
		return 1 if $out eq 't';
		usleep(100_000);
	}
	return 0;
}

# Start each of @graphs (DSL expressions) as the role, alternately from two
# sessions, so that the starts interleave with the executors' work.
sub start_interleaved
{
	my ($node, @graphs) = @_;
	my @s = map { $node->background_psql('postgres') } 1 .. 2;
	$_->query_safe("SET ROLE $ROLE") for @s;
	$s[$_ % 2]->query_safe("SELECT df.start($graphs[$_]);") for 0 .. $#graphs;
	$_->quit for @s;
}

# The rows the executors inserted into df_internal.$table, by the table
# statistics.  Executors report theirs when idle: first wait until the
# history's inserts are all counted, as one test (ok) of the caller's.
# That alone can be met early (inserts rolled back are counted too, and one
# executor may report later than another), so a caller that knows how many
# rows at least it expects gives $at_least, and it is waited for as well.
sub executor_inserts
{
	my ($node, $table, $at_least) = @_;
	my $inserts = sub {
		"SELECT n_tup_ins FROM pg_stat_all_tables "
		  . "WHERE schemaname = 'df_internal' AND relname = '$_[0]'";
	};
	ok(query_until($node,
			"SELECT (" . $inserts->('events') . ") >= (SELECT count(*) FROM df_internal.events)"),
		'the executors reported their table statistics');
	ok(query_until($node, "SELECT (" . $inserts->($table) . ") >= $at_least"),
		"the executors reported at least $at_least inserts into $table")
	  if defined $at_least;
	return $node->safe_psql('postgres', $inserts->($table));
}

# A SQL step that sleeps and records its effect under the key $step.
sub step_sql
{
	my ($step, $sleep) = @_;
	$sleep //= 0.5;
	return "INSERT INTO effects (instance_id, step) "
	  . "SELECT ''{sys_instance_id}'', ''$step'' FROM pg_sleep($sleep)";
}

# The workflows the crash tests run each round: a sequence, a JOIN followed by
# a step, and a JOIN of a sequence with a step; each step records an effect.
sub crash_shapes
{
	return (
		seq => {
			graph => sprintf("df.seq(df.seq('%s', '%s'), '%s')",
				step_sql('s1'), step_sql('s2'), step_sql('s3')),
			steps => [qw(s1 s2 s3)],
		},
		join_then => {
			graph => sprintf("df.seq(df.join('%s', '%s'), '%s')",
				step_sql('j1'), step_sql('j2'), step_sql('j3')),
			steps => [qw(j1 j2 j3)],
		},
		join_of_seq => {
			graph => sprintf("df.join(df.seq('%s', '%s'), '%s')",
				step_sql('a1'), step_sql('a2'), step_sql('b1', 1)),
			steps => [qw(a1 a2 b1)],
		});
}

# Start the workflow $graph_sql (an SQL expression) as the workflow role and
# record the steps it must run; returns the instance id.
sub start_instance
{
	my ($node, $graph_sql, @steps) = @_;
	my $id = $node->safe_psql('postgres',
		"SET ROLE $ROLE; SELECT df.start($graph_sql);");
	die "df.start returned '$id'" unless $id =~ /^[0-9a-f]{8}$/;
	$node->safe_psql('postgres',
		    "INSERT INTO expected VALUES "
		  . join(', ', map { "('$id', '$_')" } @steps));
	return $id;
}

# Wait (up to 60 seconds, well above what the tests need) until no instance
# is pending or running.  Returns whether that happened.
sub wait_instances_done
{
	my ($node, $what) = @_;
	my $done;
	for (my $i = 0; $i < 600; $i++)
	{
		# (psql, not safe_psql: the server may be restarting after a crash)
		$node->psql($DB,
			"SELECT count(*) = 0 FROM df.instances WHERE status IN ('pending', 'running')",
			stdout => \$done);
		last if $done eq 't';
		usleep(100_000);
	}
	my $ok = ok($done eq 't', "$what: every instance finished");
	unless ($ok)
	{
		my $state;
		$node->psql($DB, q{
SELECT string_agg(format('%s %s (%s tasks)', i.id, i.status,
                         (SELECT count(*) FROM df_internal.tasks t WHERE t.instance_id = i.id)), ', ')
FROM df.instances i WHERE i.status IN ('pending', 'running')}, stdout => \$state);
		diag "unfinished: $state";
	}
	return $ok;
}

# Wait until an executor is inside a step whose query matches $like, and
# return its pid.
sub executor_pid_in_step
{
	my ($node, $like) = @_;
	my $cond =
	    "backend_type = 'pg_durable executor' AND state = 'active' "
	  . "AND query LIKE '%pg_sleep%' AND query LIKE '$like'";
	# One query finds and names the executor: with a separate "is there
	# one?" poll, the step could end between the two and never come back.
	my $deadline = time() + $PostgreSQL::Test::Utils::timeout_default;
	while (time() < $deadline)
	{
		my $pid = $node->safe_psql('postgres',
			"SELECT pid FROM pg_stat_activity WHERE $cond ORDER BY pid LIMIT 1");
		return $pid if $pid =~ /^\d+$/;
		usleep(20_000);
	}
	diag_engine($node);
	die "no executor ran a step matching $like";
}

# What the engine is doing, for a test that waited in vain: the executors
# and the launcher, the unfinished instances, the task queue and df.check().
sub diag_engine
{
	my ($node) = @_;
	my ($out, $err) = ('', '');
	$node->psql('postgres', q{
SELECT format('%s %s %s %s/%s xact %s: %s', pid, backend_type, state, wait_event_type, wait_event,
              xact_start, left(query, 100))
FROM pg_stat_activity WHERE backend_type LIKE 'pg_durable%' OR backend_type = 'autovacuum worker';
SELECT format('instance %s %s', id, status) FROM df.instances WHERE status IN ('pending', 'running');
SELECT format('task %s %s %s %s run_at %s (now %s) attempts %s', id, instance_id, node_id, kind,
              run_at, clock_timestamp(), attempts) FROM df_internal.tasks;
SELECT format('lock %s %s %s granted %s pid %s', locktype, relation::regclass, mode, granted, pid)
FROM pg_locks WHERE NOT granted OR pid IN (SELECT pid FROM pg_stat_activity WHERE backend_type LIKE 'pg_durable%');
SELECT format('check %s %s %s', instance_id, problem, detail) FROM df.check();},
		stdout => \$out, stderr => \$err);
	diag "engine state:\n$out$err";
	return;
}

# Every instance completed, and every expected effect exists exactly once
# (none missing, none doubled, none unexpected).
sub check_effects
{
	my ($node, $ninstances) = @_;
	my $ok = is( $node->safe_psql($DB,
			"SELECT status, count(*) FROM df.instances GROUP BY status ORDER BY status"),
		"completed|$ninstances",
		"all $ninstances instances completed");
	$ok &= is( $node->safe_psql($DB, q{
SELECT coalesce(string_agg(format('%s/%s: %s', instance_id, step, n), ', '), 'none')
FROM (SELECT instance_id, step, count(e.at) AS n
      FROM expected x FULL JOIN effects e USING (instance_id, step)
      GROUP BY instance_id, step, x.instance_id IS NULL
      HAVING count(e.at) <> 1 OR x.instance_id IS NULL) wrong}),
		'none',
		'every effect exists exactly once');
	return $ok;
}

sub check_engine_empty
{
	my ($node) = @_;
	is( $node->safe_psql($DB, q{
SELECT (SELECT count(*) FROM df_internal.tasks) || ' tasks, '
    || (SELECT count(*) FROM df_internal.runs) || ' runs, '
    || (SELECT count(*) FROM df_internal.joins) || ' joins, '
    || (SELECT count(*) FROM df_internal.results) || ' results'}),
		'0 tasks, 0 runs, 0 joins, 0 results',
		'nothing left in the engine tables');
	return;
}

# df.check() finds no problem (one test, named after $what); else the
# problems, as a diagnostic.
sub check_df_clean
{
	my ($node, $what) = @_;
	is($node->safe_psql('postgres', 'SELECT count(*) FROM df.check()'),
		'0', "df.check() clean after $what")
	  or diag $node->safe_psql('postgres', 'SELECT * FROM df.check()');
	return;
}

my @http_pids;
END { kill 'TERM', @http_pids if @http_pids; }

# Start the local HTTP test server (test/http_server.pl) on a free loopback
# port; it stops with the test.  Returns its base URL, http://localhost:PORT.
# Start a test server: fork, send its output to tmp_check/log/NAME.log,
# exec @cmd (which writes its port, or a JSON of ports, to the file
# tmp_check/NAME.port, given as the argument after the placeholder PORT_FILE),
# and wait for that file.  Returns (what the file holds, chomped; pid); dies
# (or, with $may_fail, returns undef) when it does not appear.  The server is
# killed when the test ends.
sub start_server
{
	my ($name, $may_fail, @cmd) = @_;
	my $port_file = "$PostgreSQL::Test::Utils::tmp_check/$name.port";
	unlink $port_file;
	@cmd = map { $_ eq 'PORT_FILE' ? $port_file : $_ } @cmd;
	my $pid = fork() // die "fork: $!";
	if ($pid == 0)
	{
		open(STDOUT, '>>', "$PostgreSQL::Test::Utils::log_path/$name.log");
		open(STDERR, '>&', \*STDOUT);
		exec(@cmd) or die "exec: $!";
	}
	push @http_pids, $pid;
	for (my $i = 0; $i < 100 && !-s $port_file; $i++) { usleep(100_000); }
	if (!-s $port_file)
	{
		return undef if $may_fail;
		die "$name did not start: "
		  . (-e "$PostgreSQL::Test::Utils::log_path/$name.log"
			? PostgreSQL::Test::Utils::slurp_file("$PostgreSQL::Test::Utils::log_path/$name.log") : '');
	}
	my $port = PostgreSQL::Test::Utils::slurp_file($port_file);
	chomp $port;
	return ($port, $pid);
}

sub start_http_server
{
	my ($port) = start_server('http_server', 0, $^X, dirname(__FILE__) . '/../http_server.pl',
		'--port-file', 'PORT_FILE', '--parent', $$);
	return "http://localhost:$port";
}

sub start_otlp_receiver
{
	my ($port, $out) = @_;
	my ($p, $pid) = start_server('otlp_receiver', 0, $^X, dirname(__FILE__) . '/../otlp_receiver.pl',
		'--port', $port, '--port-file', 'PORT_FILE', '--out', $out, '--parent', $$);
	return ("http://127.0.0.1:$p", $pid);
}

sub http_get
{
	my ($base, $path) = @_;
	my $res = HTTP::Tiny->new(timeout => 10)->get("$base$path");
	die "GET $path: $res->{status} $res->{content}" unless $res->{success};
	return decode_json($res->{content});
}

# The tables and the query gate of the df.map tests that kill executors
# (t/033, t/054): map_effects (n int, and $more_columns) for the steps'
# effects, query_runs for each run of the MAP's query, and
# map_query_gate(), which logs a run and sleeps until the table killed has
# a row (the test kills the executor running the first run).
sub map_kill_setup
{
	my ($node, $more_columns) = @_;
	my $columns = 'n int NOT NULL' . ($more_columns ? ", $more_columns" : '');
	$node->safe_psql($DB, qq{
CREATE TABLE map_effects ($columns);
GRANT INSERT, SELECT ON map_effects TO $ROLE;
CREATE TABLE query_runs (at timestamptz NOT NULL DEFAULT clock_timestamp());
GRANT INSERT, SELECT ON query_runs TO $ROLE;
CREATE TABLE killed (done bool);
GRANT SELECT ON killed TO $ROLE;
CREATE FUNCTION map_query_gate() RETURNS int LANGUAGE plpgsql AS \$\$
BEGIN
	INSERT INTO query_runs DEFAULT VALUES;
	IF NOT EXISTS (SELECT FROM killed) THEN
		PERFORM pg_sleep(300);
	END IF;
	RETURN 0;
END \$\$;
GRANT EXECUTE ON FUNCTION map_query_gate() TO $ROLE;
});
	return;
}

# Wait until the engine has its $workers executors again, none of them the
# killed process $killed (0: after a restart).  query_until passes the query
# with -c: a psql fed on stdin dies of EPIPE when the server refuses it
# during the restart after the crash.
sub wait_executors_again
{
	my ($node, $workers, $killed) = @_;
	return query_until($node,
		"SELECT count(*) = $workers FROM pg_stat_activity "
		  . "WHERE backend_type = 'pg_durable executor' AND pid <> $killed");
}

# SIGKILL an executor while fewer than $rows effects are in map_effects,
# then wait for the engine to have its $workers executors again.
sub kill_an_executor
{
	my ($node, $workers, $rows, $what) = @_;
	is($node->safe_psql($DB, "SELECT count(*) < $rows FROM map_effects"),
		't', "rows are left to run $what");
	my $pid = $node->safe_psql($DB,
		"SELECT pid FROM pg_stat_activity WHERE backend_type = 'pg_durable executor' "
		  . "ORDER BY pid LIMIT 1");
	die "no executor to kill" unless $pid =~ /^\d+$/;
	kill 'KILL', $pid;
	ok(wait_executors_again($node, $workers, $pid),
		"the engine came back after a SIGKILL $what");
	return;
}

1;

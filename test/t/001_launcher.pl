# The launcher background worker: starts with the server, survives SIGHUP,
# comes back after SIGTERM and after a SIGKILL (crash restart); and the
# library refuses to load outside shared_preload_libraries.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $node = PostgreSQL::Test::Cluster->new('launcher');
$node->init;
$node->append_conf('postgresql.conf', qq{
shared_preload_libraries = 'pg_durable'
pg_durable.database = 'postgres'
restart_after_crash = on
});
$node->start;

my $launcher_pid_sql =
  "SELECT pid FROM pg_stat_activity WHERE backend_type = 'pg_durable launcher'";

sub wait_for_launcher
{
	my ($not_pid) = @_;
	$not_pid //= 0;
	ok( $node->poll_query_until(
			'postgres',
			"SELECT count(*) = 1 FROM ($launcher_pid_sql) l WHERE pid <> $not_pid"),
		"launcher running (not pid $not_pid)");
	return $node->safe_psql('postgres', $launcher_pid_sql);
}

my $pid = wait_for_launcher();
like($pid, qr/^\d+$/, 'launcher has a pid');
ok($node->log_contains('pg_durable launcher started'), 'launcher logged its start');

# SIGHUP: the launcher re-reads its configuration and keeps running
my $offset = -s $node->logfile;
$node->reload;
$node->wait_for_log(qr/pg_durable launcher reloaded its configuration/, $offset);
is($node->safe_psql('postgres', $launcher_pid_sql), $pid, 'same launcher after SIGHUP');

# SIGTERM: the launcher exits and the postmaster starts it again
kill 'TERM', $pid;
my $pid2 = wait_for_launcher($pid);
isnt($pid2, $pid, 'a new launcher after SIGTERM');

# SIGKILL: the postmaster treats it as a crash, reinitializes and restarts it
$offset = -s $node->logfile;
kill 'KILL', $pid2;
$node->wait_for_log(qr/all server processes terminated; reinitializing/, $offset);
my $pid3 = wait_for_launcher($pid2);
isnt($pid3, $pid2, 'a new launcher after SIGKILL');

# postmaster shutdown stops it cleanly
$node->stop('fast');
ok(!kill(0, $pid3), 'launcher gone after shutdown');

# without shared_preload_libraries the library refuses to load
my $plain = PostgreSQL::Test::Cluster->new('nopreload');
$plain->init;
$plain->start;
my ($ret, $stdout, $stderr) = $plain->psql('postgres', 'CREATE EXTENSION pg_durable');
isnt($ret, 0, 'CREATE EXTENSION fails without preload');
like($stderr, qr/pg_durable must be loaded via shared_preload_libraries/,
	'error names shared_preload_libraries');
($ret, $stdout, $stderr) = $plain->psql('postgres', "LOAD 'pg_durable'");
like($stderr, qr/pg_durable must be loaded via shared_preload_libraries/,
	'LOAD is refused too');
$plain->stop;

done_testing();

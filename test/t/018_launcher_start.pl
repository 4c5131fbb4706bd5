# The launcher's start-up with a configuration that cannot be met in full
#, each on a cluster of its own:
# 1. more executors than free worker slots: the HTTP worker gets its slot
#    right after executor 0, before the other executors, HTTP steps run,
#    and the log says what was left out; with no slot left for the HTTP
#    worker at all, df.check() says so (http_worker_missing);
# 2. pg_durable.database names a missing database: the log says so, at
#    start and again a minute later, and df.check() in the database that
#    holds the extension says so too; once the database is created the
#    workers start there;
# 3. pg_durable.worker_role is not a superuser: one log line with a hint,
#    no worker is started (so no stream of permission errors), df.check()
#    says so; once the role is made a superuser the workers start.
use strict;
use warnings;
use FindBin;
use lib "$FindBin::RealBin/../perl";
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use PgDurableTest;

sub new_node
{
	my ($name, $conf) = @_;
	my $node = PostgreSQL::Test::Cluster->new($name);
	$node->init;
	$node->append_conf('postgresql.conf', qq{
shared_preload_libraries = 'pg_durable'
pg_durable.http_allow_private = on
$conf
});
	return $node;
}

# wait_for_log as a test: on a server that never logs it, the test fails
# (after PG_TEST_TIMEOUT_DEFAULT) and the rest still runs
sub log_appears
{
	my ($node, $re, $name) = @_;
	return ok(eval { $node->wait_for_log($re); 1 }, $name);
}

sub count_in_log
{
	my ($node, $re) = @_;
	my @n = (slurp_file($node->logfile) =~ /$re/g);
	return scalar @n;
}

my $executors_sql =
  "SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'pg_durable executor'";
my $http_sql =
  "SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'pg_durable http worker'";

# 1. pg_durable.workers = 64 with 8 worker processes: the launcher, the
# logical replication launcher, executor 0, the HTTP worker and 4 more
# executors
{
	my $base = start_http_server();
	my $node = new_node('short_slots', qq{
pg_durable.database = 'postgres'
pg_durable.workers = 64
max_worker_processes = 8
});
	$node->start;
	log_appears($node, qr/pg_durable launcher started only \d+ of 64 executors/,
		'the launcher says it started only some executors');
	ok($node->poll_query_until('postgres', "SELECT ($http_sql) = 1"),
		'the HTTP worker runs');
	ok( !$node->log_contains(qr/and no HTTP worker/),
		'the log does not say the HTTP worker was left out');
	ok($node->log_contains(qr/DETAIL:  \d+ executors were not started, the HTTP worker was/),
		'the log says which workers were left out');
	cmp_ok($node->safe_psql('postgres', $executors_sql), '>=', 1, 'some executors run');

	$node->safe_psql('postgres', q{
CREATE EXTENSION pg_durable;
CREATE ROLE df_user LOGIN;
SELECT df.grant_usage('df_user', include_http => true);});
	my $id = $node->safe_psql('postgres',
		"SET ROLE df_user; SELECT df.start(df.http('$base/echo', 'GET', NULL, NULL, 30), 'http')");
	my (undef, $status) =
	  $node->psql('postgres', "SET ROLE df_user; SELECT df.await_instance('$id', 60)");
	is($status, 'completed', 'an HTTP step completes');
	is($node->safe_psql('postgres', 'SELECT count(*) FROM df.check()'), '0',
		'df.check() reports nothing while the HTTP worker runs');

	# 3 worker processes: the launcher, the logical replication launcher
	# and executor 0 take them all, the HTTP worker is left out
	$node->append_conf('postgresql.conf', "max_worker_processes = 3\n");
	$node->restart;
	log_appears($node, qr/pg_durable launcher started only 1 of 64 executors and no HTTP worker/,
		'the launcher says it started no HTTP worker');
	like( $node->safe_psql('postgres', 'SELECT problem, detail FROM df.check()'),
		qr/^http_worker_missing\|the launcher found no free background worker slot for the HTTP worker/,
		'df.check() says the HTTP worker is missing');
	is($node->safe_psql('postgres', $http_sql), '0', 'no HTTP worker runs');
	$node->append_conf('postgresql.conf', "max_worker_processes = 8\n");
	$node->restart;
	ok($node->poll_query_until('postgres', "SELECT ($http_sql) = 1"),
		'the HTTP worker runs again with more slots');
	is($node->safe_psql('postgres', 'SELECT count(*) FROM df.check()'), '0',
		'df.check() reports nothing then');
	$node->stop;
}

# 2. a missing pg_durable.database: the extension is in postgres, then the
# setting is changed to a database that does not exist (a typo, say)
{
	my $node = new_node('missing_db', qq{
pg_durable.database = 'postgres'
pg_durable.workers = 1
max_worker_processes = 16
});
	$node->start;
	$node->safe_psql('postgres', 'CREATE EXTENSION pg_durable');
	$node->stop;
	$node->append_conf('postgresql.conf', "pg_durable.database = 'nodb'\n");
	$node->start;
	log_appears($node, qr/LOG:  pg_durable.database "nodb" does not exist/,
		'the launcher says the database does not exist');
	ok($node->log_contains(qr/HINT:  Create the database and the extension in it/),
		'with a hint');
	# and again every minute while it is missing, not only at start
	my $first_at = -s $node->logfile;
	ok( eval {
			$node->wait_for_log(qr/LOG:  pg_durable.database "nodb" does not exist/, $first_at);
			1;
		},
		'the launcher says it again later (it logs the missing database every minute)');
	is($node->safe_psql('postgres', $executors_sql), '0', 'no executor runs');
	like( $node->safe_psql('postgres', 'SELECT problem, detail FROM df.check()'),
		qr/^not_engine_database\|pg_durable.database is "nodb", which does not exist: no executor runs the instances of database "postgres"/,
		'df.check() in postgres says the engine does not run here');

	$node->safe_psql('postgres', 'CREATE DATABASE nodb');
	$node->safe_psql('nodb', 'CREATE EXTENSION pg_durable');
	log_appears($node, qr/pg_durable launcher is starting the workers in database "nodb"/,
		'the launcher says it starts the workers once the database exists');
	ok($node->poll_query_until('nodb', "SELECT ($executors_sql) = 1"),
		'the executor starts once the database exists');
	is($node->safe_psql('nodb', 'SELECT count(*) FROM df.check()'), '0',
		'df.check() in nodb reports nothing');
	like( $node->safe_psql('postgres', 'SELECT detail FROM df.check()'),
		qr/^pg_durable.database is "nodb": no executor runs/,
		'df.check() in postgres still says the engine runs elsewhere');
	$node->stop;
}

# 3. a pg_durable.worker_role that does not exist, then exists without
# superuser, then becomes a superuser
{
	my $node = new_node('plain_role', qq{
pg_durable.database = 'postgres'
pg_durable.worker_role = 'plain'
pg_durable.workers = 2
max_worker_processes = 16
});
	$node->start;
	log_appears($node,
		qr/LOG:  pg_durable.worker_role "plain" does not exist: no pg_durable worker is started/,
		'the launcher says the worker role does not exist');
	$node->safe_psql('postgres', 'CREATE EXTENSION pg_durable; CREATE ROLE plain LOGIN');
	log_appears($node,
		qr/LOG:  pg_durable.worker_role "plain" is not a superuser: no pg_durable worker is started/,
		'the launcher says the worker role is not a superuser');
	ok($node->log_contains(qr/HINT:  Set pg_durable.worker_role to a superuser and restart the server/),
		'with a hint');
	is($node->safe_psql('postgres', $executors_sql), '0', 'no executor runs');
	is($node->safe_psql('postgres', $http_sql), '0', 'no HTTP worker runs');
	like( $node->safe_psql('postgres', 'SELECT problem, detail FROM df.check()'),
		qr/^worker_role_refused\|pg_durable.worker_role "plain" is not a superuser that can log in/,
		'df.check() says the worker role was refused');

	$node->safe_psql('postgres', 'ALTER ROLE plain SUPERUSER');
	log_appears($node, qr/pg_durable launcher is starting the workers in database "postgres" as role "plain"/,
		'the launcher says it starts the workers once the role is a superuser');
	ok($node->poll_query_until('postgres', "SELECT ($executors_sql) = 2"),
		'the executors start once the role is a superuser');
	is($node->safe_psql('postgres', 'SELECT count(*) FROM df.check()'), '0',
		'df.check() reports nothing then');
	is(count_in_log($node, qr/is not a superuser: no pg_durable worker is started/), 1,
		'the refusal was logged once');
	is(count_in_log($node, qr/permission denied|must be superuser/), 0,
		'no permission error in the log');
	$node->stop;
}

done_testing();

# HTTP steps are at-least-once with fencing (docs/design/batches-and-inbox.md §1):
#  1. SIGKILL the HTTP worker while a call waits on a slow response: the
#     server reinitializes, the call's lease expires, the call is made again
#     with the same Idempotency-Key and the instance completes; the step after
#     it runs exactly once.
#  2. A late completion whose lease was taken over (its lease_token changed
#     while the call was in flight, as when another claimer re-ran it) is
#     ignored: the node stays running until the lease is released and the
#     call made again.
use strict;
use warnings;
use FindBin;
use lib "$FindBin::RealBin/../perl";
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(usleep);
use PgDurableTest;

my $base = start_http_server();
my $node = engine_node('httpcrash', 2, "pg_durable.http_allow_private = on\n");
$node->safe_psql('postgres', "SELECT df.grant_usage('df_user', include_http => true)");

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

sub http_worker_pid
{
	my $pid;
	$node->poll_query_until('postgres',
		"SELECT count(*) = 1 FROM pg_stat_activity WHERE backend_type = 'pg_durable http worker'")
	  or die "no HTTP worker";
	return $node->safe_psql('postgres',
		"SELECT pid FROM pg_stat_activity WHERE backend_type = 'pg_durable http worker'");
}

# --- 1. crash during a call ---------------------------------------------------
my $id = start_instance($node,
	"df.seq(df.http('$base/delay/3000', 'GET', NULL, NULL, 10) |=> 'h', "
	  . "'INSERT INTO effects (instance_id, step) SELECT ''{sys_instance_id}'', ''after_'' || \$h.status')",
	'after_200');
wait_requests('/delay/3000', 1);
my $pid = http_worker_pid();
my $offset = -s $node->logfile;
ok(kill('KILL', $pid), "SIGKILL the HTTP worker $pid during the call");
$node->wait_for_log(qr/all server processes terminated; reinitializing/, $offset);
wait_engine_ready($node, 2);
isnt(http_worker_pid(), $pid, 'a new HTTP worker runs');

wait_instances_done($node, 'after the crash');
check_effects($node, 1);
my $log = wait_requests('/delay/3000', 2);
is(scalar(@$log), 2, 'the call was made twice');
is($log->[0]{key}, $log->[1]{key}, 'with the same Idempotency-Key');
like($log->[0]{key}, qr/^$id:[0-9a-f]{8}:\d+$/, 'the key is <instance>:<node>:<generation>');
is( $node->safe_psql('postgres', qq{
SELECT string_agg(kind || '/' || coalesce(attempt::text, '-'), ' ' ORDER BY id)
FROM df_internal.events WHERE instance_id = '$id' AND node_id IN
  (SELECT id FROM df.nodes WHERE instance_id = '$id' AND node_type = 'HTTP')}),
	'node_started/- node_completed/2',
	'the node completed on its second attempt');

# --- 2. a stale completion is ignored ------------------------------------------
$id = $node->safe_psql('postgres',
	"SET ROLE df_user; SELECT df.start(df.http('$base/delay/2001', 'GET', NULL, NULL, 10));");
wait_requests('/delay/2001', 1);
# take the lease over, as a second claimer would after an expiry
is( $node->safe_psql('postgres', q{
UPDATE df_internal.tasks SET lease_token = gen_random_uuid(), lease_until = now() + interval '1 hour'
WHERE kind = 'http' RETURNING kind}),
	'http', 'the lease of the call in flight is taken over');
$offset = -s $node->logfile;
$node->append_conf('postgresql.conf', "log_min_messages = log\n");
$node->reload;
$node->wait_for_log(qr/ignoring a late completion of HTTP step [0-9a-f]{8} of instance $id/, $offset);
is( $node->safe_psql('postgres', qq{
SELECT i.status || ' ' || n.status FROM df.instances i JOIN df.nodes n ON n.instance_id = i.id
WHERE i.id = '$id'}),
	'running running',
	'the late completion was not applied');
# the lease expires: the call is made again and completes
$node->safe_psql('postgres', q{UPDATE df_internal.tasks SET lease_until = now() WHERE kind = 'http'});
wait_instances_done($node, 'after the lease expired');
is( $node->safe_psql('postgres', qq{
SELECT i.status || ' ' || (n.result->>'status') || ' ' || (n.result->>'body')
FROM df.instances i JOIN df.nodes n ON n.instance_id = i.id WHERE i.id = '$id'}),
	'completed 200 slept 2001',
	'the instance completed with the second call');
$log = wait_requests('/delay/2001', 2);
is($log->[0]{key}, $log->[1]{key}, 'the second call had the same Idempotency-Key');

check_engine_empty($node);
$node->stop('fast');
done_testing();

# Circuit breakers against the local test server made to fail
# (docs/design/breakers.md).  /service/NAME answers as /fault/NAME/MODE set
# it (test/http_server.pl); the server's request log counts the calls.
#  1. after minimum_calls failures the breaker opens: the server's request
#     counter stops growing while later steps fail at once with kind
#     circuit_open;
#  2. after wait_duration one probe goes through; the server hangs on it:
#     the probe's permit expires, the breaker opens again (it is not stuck)
#     and, the server restored, the next probe closes it;
#  3. an open breaker stays open across pg_ctl restart -m immediate, with
#     the same open_until, and still makes no call.
use strict;
use warnings;
use FindBin;
use lib "$FindBin::RealBin/../perl";
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(usleep);
use HTTP::Tiny;
use PgDurableTest;

my $base = start_http_server();
my $node = engine_node('breakers', 2, "pg_durable.http_allow_private = on\n");
my $role = $PgDurableTest::ROLE;
$node->safe_psql('postgres', qq{
SELECT df.grant_usage('$role', include_http => true);
GRANT EXECUTE ON FUNCTION df.create_circuit_breaker(text, int, int, int, interval, int, interval, int, text[])
	TO $role;
});

sub calls
{
	my ($name) = @_;
	return scalar @{ http_get($base, "/log?path=/service/$name") };
}

sub fault
{
	my ($name, $mode) = @_;
	http_get_text("/fault/$name/$mode");
	return;
}

sub http_get_text
{
	my ($path) = @_;
	my $res = HTTP::Tiny->new(timeout => 10)->get("$base$path");
	die "GET $path: $res->{status}" unless $res->{success};
	return $res->{content};
}

# An HTTP step to /service/$name whose config names breaker $name.
sub service_step
{
	my ($name) = @_;
	return $node->safe_psql('postgres', qq{
SELECT jsonb_set(j, '{query}', to_jsonb(jsonb_set((j->>'query')::jsonb, '{breaker}', to_jsonb('$name'::text))::text))::text
FROM (SELECT df.http('$base/service/$name', 'GET', NULL, NULL, 60)::jsonb AS j) s});
}

sub start
{
	my ($step) = @_;
	return $node->safe_psql('postgres', "SET ROLE $role; SELECT df.start('$step');");
}

sub wait_done
{
	my ($id) = @_;
	query_until($node,
		"SELECT status NOT IN ('pending', 'running') FROM df.instances WHERE id = '$id'")
	  or die "instance $id did not end";
	return $node->safe_psql('postgres', qq{
SELECT i.status || ':' || coalesce(n.status_details::jsonb->'error'->>'code', '')
FROM df.instances i JOIN df.nodes n ON n.instance_id = i.id AND n.id = i.root_node
WHERE i.id = '$id'});
}

sub state
{
	my ($name) = @_;
	return $node->safe_psql('postgres', "SELECT state FROM df.circuit_breakers WHERE name = '$name'");
}

# --- 1. opening ---------------------------------------------------------------
$node->safe_psql('postgres', "SET ROLE $role; SELECT df.create_circuit_breaker('inv', "
	  . "failure_rate_threshold => 50, minimum_calls => 4, window_size => 4, "
	  . "wait_duration => '3 s', half_open_calls => 1)");
my $inv = service_step('inv');
fault('inv', 503);
for my $i (1 .. 4)
{
	is(wait_done(start($inv)), 'failed:http:503', "call $i fails with the server's 503");
	is(state('inv'), $i < 4 ? 'closed' : 'open',
		$i < 4 ? "closed below minimum_calls ($i calls)" : 'open after minimum_calls failures');
}
is(calls('inv'), 4, 'the server saw 4 calls');
my @refused = map { start($inv) } 1 .. 3;
is(wait_done($_), 'failed:circuit_open', "refused at once with kind circuit_open") for @refused;
is(calls('inv'), 4, 'open: the server request counter stopped growing');

# --- 2. a probe that hangs, then the server restored ----------------------------
query_until($node, "SELECT state = 'half_open' FROM df.circuit_breakers WHERE name = 'inv'")
  or die "the breaker did not become half-open";
fault('inv', 'hang');
my $probe = start($inv);
for (my $i = 0; $i < 300 && calls('inv') < 5; $i++) { usleep(100_000); }
is(calls('inv'), 5, 'after wait_duration one probe goes through');
my $second = start($inv);
is(wait_done($second), 'failed:circuit_open', 'while the probe is out, other calls are refused');
is(calls('inv'), 5, 'only one probe reached the server');
query_until($node, "SELECT state = 'open' FROM df.circuit_breakers WHERE name = 'inv'")
  or die "the lost probe did not reopen the breaker";
pass('the probe that never returned counted as failed: the breaker is open again, not stuck');
fault('inv', 'ok');
query_until($node, "SELECT state = 'half_open' FROM df.circuit_breakers WHERE name = 'inv'")
  or die "the breaker did not become half-open again";
is(wait_done(start($inv)), 'completed:', 'the next probe succeeds');
is(state('inv'), 'closed', 'server restored: the breaker is closed');
is(calls('inv'), 6, 'one more call made');
$node->safe_psql('postgres', "SELECT df.cancel('$probe', 'test')");
like(
	$node->safe_psql('postgres',
		"SELECT string_agg(from_state || '>' || to_state, ',' ORDER BY at) FROM df.circuit_breaker_history WHERE name = 'inv'"),
	qr/^closed>open,open>half_open,half_open>open,open>half_open,half_open>closed$/,
	'history: opened, half-open, reopened by the lost probe, half-open, closed');
is( $node->safe_psql('postgres',
		"SELECT count(*) FROM df.circuit_breaker_history WHERE name = 'inv' AND reason = 'a half-open probe did not return in time'"),
	'1', 'the reopening says the probe did not return');

# --- 3. an open breaker across an immediate restart ----------------------------------
$node->safe_psql('postgres', "SET ROLE $role; SELECT df.create_circuit_breaker('persist', "
	  . "minimum_calls => 1, window_size => 1, wait_duration => '1 hour')");
my $persist = service_step('persist');
fault('persist', 500);
is(wait_done(start($persist)), 'failed:http:500', 'one failure');
is(state('persist'), 'open', 'opens the breaker');
my $until = $node->safe_psql('postgres', "SELECT open_until FROM df.circuit_breakers WHERE name = 'persist'");
$node->stop('immediate');
$node->start;
wait_engine_ready($node, 2);
pass('restarted after pg_ctl stop -m immediate');
is( $node->safe_psql('postgres', "SELECT state || ' ' || open_until FROM df.circuit_breakers WHERE name = 'persist'"),
	"open $until", 'the breaker is still open, until the same time');
fault('persist', 'ok');
is(wait_done(start($persist)), 'failed:circuit_open', 'and still refuses calls');
is(calls('persist'), 1, 'no call made after the restart');

done_testing();

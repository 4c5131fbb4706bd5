# Tracing: one trace per instance, exported over OTLP/HTTP JSON.
#  1. A workflow of SQL and HTTP steps (one retried, one failed), started
#     with a traceparent, reaches the test collector as one trace whose
#     span tree matches the graph and df.instance_spans: parents, kinds,
#     attempt spans under the retried step, error status on the failed one.
#  2. The local HTTP server received traceparent headers naming the
#     instance's trace and the HTTP attempt's span as the parent.
#  3. The collector down, then answering 503: the spans are exported once it
#     takes them again, none lost, none twice.
#  4. A server restart while the collector is down: the cursor is kept, the
#     spans are exported after the restart, none twice.
#  5. Interop with the OpenTelemetry JavaScript SDK (test/otel-node, run
#     when node and its node_modules are there: .ci/run installs them): a
#     Node service called by an HTTP step exports its own SERVER span to the
#     same collector, and its parent is our CLIENT span.
use strict;
use warnings;
use FindBin;
use lib "$FindBin::RealBin/../perl";
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(usleep);
use JSON::PP;
use PgDurableTest;

my $base = start_http_server();
my $out = "$PostgreSQL::Test::Utils::tmp_check/otlp_spans.jsonl";
unlink $out;
my ($otlp, $otlp_pid) = start_otlp_receiver(0, $out);
my ($otlp_port) = $otlp =~ /:(\d+)$/;
my $node = engine_node('tracing', 2, qq{
pg_durable.http_allow_private = on
pg_durable.otel_endpoint = '$otlp'
pg_durable.otel_service_name = 'orders-db'
pg_durable.otel_headers = 'x-collector-key=k1'
});
$node->safe_psql('postgres', "SELECT df.grant_usage('df_user', include_http => true)");

my $trace = '4bf92f3577b34da6a3ce929d0e0e4736';
my $caller_span = '00f067aa0ba902b7';

sub start_as_user
{
	my ($sql) = @_;
	return $node->safe_psql('postgres', "SET ROLE df_user; SELECT $sql");
}

sub wait_status
{
	my ($id, $status) = @_;
	ok(query_until($node, "SELECT df.status('$id') = '$status'"), "instance $id is $status")
	  or diag $node->safe_psql('postgres', "SELECT kind, node_id, detail FROM df.history('$id')");
}

# The spans df.instance_spans derives, as the collector should have them.
sub local_spans
{
	my ($id) = @_;
	my $rows = $node->safe_psql('postgres', qq{
SELECT json_agg(json_build_object('trace_id', trace_id, 'span_id', span_id,
	'parent_span_id', coalesce(parent_span_id, ''), 'name', name, 'kind', kind,
	'status', status, 'node_id', attributes->>'pg_durable.node_id',
	'attempt', attributes->>'pg_durable.attempt'))
FROM df.instance_spans('$id')});
	return decode_json($rows);
}

# Wait until the collector has every span of instance $id (by span id).
sub collected_spans
{
	my ($id) = @_;
	my $want = local_spans($id);
	my %want = map { $_->{span_id} => 1 } @$want;
	for (my $i = 0; $i < 600; $i++)
	{
		my @got = grep { $want{ $_->{span_id} } } @{ http_get($otlp, '/spans') };
		my %seen = map { $_->{span_id} => 1 } @got;
		return ($want, \@got) if keys(%seen) == keys(%want);
		usleep(100_000);
	}
	return ($want, [ grep { $want{ $_->{span_id} } } @{ http_get($otlp, '/spans') } ]);
}

my %kind_code = (INTERNAL => 1, SERVER => 2, CLIENT => 3);
my %status_code = (UNSET => 0, OK => 1, ERROR => 2);

# --- 1. one trace, the tree of the graph --------------------------------------
my $id = start_as_user(qq{df.start(
	'SELECT 1' ~> df.retry(df.http('$base/flaky/t1/1/503'), max_attempts => 3,
	                         initial_interval => '10 ms')
	~> (df.http('$base/echo') |=> 'echo') ~> 'SELECT 1/0',
	'traced', traceparent => '00-$trace-$caller_span-01')});
wait_status($id, 'failed');
my ($want, $got) = collected_spans($id);
is(scalar(@$got), scalar(@$want), 'every span of the instance reached the collector once')
  or diag explain $got;
is(scalar(grep { $_->{trace_id} ne $trace } @$got), 0, 'all of them in the trace given to df.start');
my %got = map { $_->{span_id} => $_ } @$got;
my $mismatch = 0;
for my $w (@$want)
{
	my $g = $got{ $w->{span_id} } or next;
	$mismatch++, diag "span $w->{span_id}: " . explain($g)
	  if $g->{parent_span_id} ne $w->{parent_span_id} || $g->{name} ne $w->{name}
	  || $g->{kind} != $kind_code{ $w->{kind} } || $g->{status} != $status_code{ $w->{status} };
}
is($mismatch, 0, 'the exported spans are those of df.instance_spans (parents, names, kinds, statuses)');
is($got->[0]{service}, 'orders-db', 'service.name is pg_durable.otel_service_name');
is(http_get($otlp, '/posts')->{headers}{'x-collector-key'}, 'k1', 'pg_durable.otel_headers are sent');

my ($root) = grep { $_->{kind} == 2 } @$got;
is($root->{parent_span_id}, $caller_span, "the root span's parent is the caller's span");
is($root->{status}, 2, 'the failed instance has an error status');

# the graph: parent of every node execution is the execution of its parent
# node, or of the outermost THEN of a sequence (a THEN inside a THEN has no
# span: the steps of a sequence are siblings)
my (%parent_node, %type);
for my $line (split /\n/, $node->safe_psql('postgres',
	"SELECT id, coalesce(left_node, ''), coalesce(right_node, ''), node_type FROM df.nodes WHERE instance_id = '$id'"))
{
	my ($n, $l, $r, $t) = split /\|/, $line;
	$parent_node{$l} = $n if $l ne '';
	$parent_node{$r} = $n if $r ne '';
	$type{$n} = $t;
}
sub spanned_parent
{
	my ($n) = @_;
	my $p = $parent_node{$n};
	$p = $parent_node{$p}
	  while defined $p && $type{$p} eq 'THEN' && defined $parent_node{$p}
	  && $type{ $parent_node{$p} } eq 'THEN';
	return $p;
}
is(scalar(grep { ($_->{attributes}{'pg_durable.node_type'} // '') eq 'THEN' } @$got), 1,
	'the sequence of four is one THEN span');
my $bad_parent = 0;
for my $s (grep { $_->{kind} != 2 && !defined $_->{attributes}{'pg_durable.attempt'} } @$got)
{
	my $p = $got{ $s->{parent_span_id} };
	my $pn = spanned_parent($s->{attributes}{'pg_durable.node_id'});
	my $ok = defined $pn ? ($p && ($p->{attributes}{'pg_durable.node_id'} // '') eq $pn)
	  : ($p && $p->{kind} == 2);
	$bad_parent++, diag "span $s->{name}: parent " . ($p ? $p->{name} : 'missing') unless $ok;
}
is($bad_parent, 0, "every node execution's parent is its parent node's execution");

my @flaky_attempts = sort { $a->{attributes}{'pg_durable.attempt'} <=> $b->{attributes}{'pg_durable.attempt'} }
  grep { ($_->{attributes}{'url.full'} // '') =~ m{/flaky/t1/} && defined $_->{attributes}{'pg_durable.attempt'} } @$got;
is(scalar(@flaky_attempts), 2, 'the retried HTTP step has two attempt spans');
is_deeply([ map { $_->{kind} } @flaky_attempts ], [ 3, 3 ], 'HTTP attempts are CLIENT spans');
is_deeply([ map { $_->{status} } @flaky_attempts ], [ 2, 1 ], 'the first attempt failed, the second succeeded');
is($flaky_attempts[0]{attributes}{'http.response.status_code'}, 503, 'the failed attempt has http.response.status_code 503');
is($flaky_attempts[0]{attributes}{'http.request.method'}, 'POST', 'http.request.method');
is($flaky_attempts[0]{parent_span_id}, $flaky_attempts[1]{parent_span_id}, 'both under the same node execution');

my ($failed_sql) = grep { ($_->{attributes}{'db.query.text'} // '') eq 'SELECT 1/0' } @$got;
is($failed_sql->{status}, 2, 'the failed SQL step has an error status');
is($failed_sql->{attributes}{'error.type'}, 'sql:22012', 'with its error code');
is($failed_sql->{kind}, 1, 'SQL steps are INTERNAL spans');

# --- 2. traceparent sent to the HTTP server -----------------------------------
my $log = http_get($base, '/log?path=/flaky/t1/');
is_deeply([ map { $_->{traceparent} } @$log ],
	[ map { "00-$trace-$_->{span_id}-01" } @flaky_attempts ],
	'each call named its attempt span as the parent, in the instance\'s trace');
my ($echo_attempt) = grep { ($_->{attributes}{'url.full'} // '') =~ m{/echo$} && defined $_->{attributes}{'pg_durable.attempt'} } @$got;
my $echo_tp = $node->safe_psql('postgres',
	"SELECT ((result->>'body')::jsonb)->'headers'->>'traceparent' FROM df.nodes WHERE instance_id = '$id' AND result_name = 'echo'");
is($echo_tp, "00-$trace-$echo_attempt->{span_id}-01", 'the echo step received its CLIENT span as the parent');

# a new trace when no traceparent is given
my $id_new = start_as_user(q{df.start('SELECT 1')});
wait_status($id_new, 'completed');
my $new_trace = $node->safe_psql('postgres', "SELECT trace_id FROM df.instances WHERE id = '$id_new'");
like($new_trace, qr/^[0-9a-f]{32}$/, 'an instance started without traceparent has a new trace id');
isnt($new_trace, $trace, 'a different one');

# --- 3. the collector down, then refusing ------------------------------------
sub count_spans
{
	my ($spans, $span_ids) = @_;
	my %c;
	$c{ $_->{span_id} }++ for grep { $span_ids->{ $_->{span_id} } } @$spans;
	return \%c;
}

kill 'TERM', $otlp_pid;
waitpid($otlp_pid, 0);
my $id_down = start_as_user(q{df.start('SELECT 1' ~> 'SELECT 2', 'while down')});
wait_status($id_down, 'completed');
my $cursor_down = $node->safe_psql('postgres', 'SELECT last_event_id FROM df_internal.otel_export');
ok(query_until($node, q{SELECT count(*) > 0 FROM df.history((SELECT id FROM df.instances WHERE label = 'while down')) WHERE kind = 'instance_completed'}),
	'the instance finished while the collector was down');
($otlp, $otlp_pid) = start_otlp_receiver($otlp_port, $out);
http_get($otlp, '/fail/2');
($want, $got) = collected_spans($id_down);
is(scalar(@$got), scalar(@$want), 'its spans were exported once the collector took them again');
ok(http_get($otlp, '/posts')->{failed} >= 1, 'after the collector answered 503');

# --- 4. a server restart while the collector is down -------------------------
kill 'TERM', $otlp_pid;
waitpid($otlp_pid, 0);
my $id_restart = start_as_user(q{df.start('SELECT 1' ~> 'SELECT 2', 'across a restart')});
wait_status($id_restart, 'completed');
$node->restart;
wait_engine_ready($node, 2);
($otlp, $otlp_pid) = start_otlp_receiver($otlp_port, $out);
($want, $got) = collected_spans($id_restart);
is(scalar(@$got), scalar(@$want), 'the spans of an instance that ended before a restart were exported after it');

# --- 4b. batches of four history events ---------------------------------------
# A chain step started and run in one batch is one events row, its start
# kept in started_at (store/node_writes.c), which the exporter reads as
# two events of one id, and a one-step instance run in one batch is one
# row (instance_completed_at), four events of one id: a batch whose limit
# falls between them must end before their row, or a start or an end is
# lost.  With batches of four, many do.
$node->safe_psql('postgres', q{
ALTER SYSTEM SET pg_durable.otel_batch_events = 4;
SELECT pg_reload_conf();
});
kill 'TERM', $otlp_pid;
waitpid($otlp_pid, 0);
my $id_small = start_as_user(q{df.start(
	'SELECT 1' ~> 'SELECT 2' ~> 'SELECT 3' ~> 'SELECT 4' ~> 'SELECT 5' ~> 'SELECT 6'
	~> df.join('SELECT 7', 'SELECT 8') ~> 'SELECT 9', 'small batches')});
wait_status($id_small, 'completed');
my @one_step = map { start_as_user(qq{df.start('SELECT $_', 'one step')}) } 1 .. 6;
wait_status($_, 'completed') for @one_step;
my $one_list = join(', ', map { "'$_'" } @one_step);
cmp_ok($node->safe_psql('postgres',
		"SELECT count(instance_completed_at) FROM df_internal.events WHERE instance_id IN ($one_list)"),
	'>=', 1, 'some one-step instances wrote their whole history in one row');
cmp_ok($node->safe_psql('postgres',
		"SELECT count(started_at) FROM df_internal.events WHERE instance_id = '$id_small'"),
	'>=', 3, 'some of its steps wrote their start and their end in one row');
# and a THEN around them, with its children's events between, is one row
# too, its end's place in ended_id: the exporter windows by both ids
cmp_ok($node->safe_psql('postgres',
		"SELECT count(ended_id) FROM df_internal.events WHERE instance_id = '$id_small'"),
	'>=', 1, 'some of its THEN nodes wrote their start and their end in one row');
($otlp, $otlp_pid) = start_otlp_receiver($otlp_port, $out);
($want, $got) = collected_spans($id_small);
is(scalar(@$got), scalar(@$want), 'in batches of four events, every span was exported');
for my $one (@one_step)
{
	my ($w1, $g1) = collected_spans($one);
	is(scalar(@$g1), scalar(@$w1), "every span of one-step instance $one was exported");
}
%got = map { $_->{span_id} => $_ } @$got;
my %end = map { split /\|/ } split /\n/, $node->safe_psql('postgres', qq{
SELECT span_id, ((extract(epoch FROM end_time) * 1000000)::bigint * 1000)::text
FROM df.instance_spans('$id_small')});
$mismatch = 0;
for my $w (@$want)
{
	my $g = $got{ $w->{span_id} };
	$mismatch++, diag "span $w->{span_id}: " . explain($g) . " end $end{ $w->{span_id} }"
	  if !$g || $g->{parent_span_id} ne $w->{parent_span_id} || $g->{name} ne $w->{name}
	  || $g->{status} != $status_code{ $w->{status} } || $g->{end} ne $end{ $w->{span_id} };
}
is($mismatch, 0, 'with the parents, names, statuses and end times of df.instance_spans');
$node->safe_psql('postgres', q{
ALTER SYSTEM RESET pg_durable.otel_batch_events;
SELECT pg_reload_conf();
});

# none twice, over the whole run
my @all = @{ http_get($otlp, '/spans') };
my %times;
$times{ $_->{span_id} }++ for @all;
is(scalar(grep { $_ > 1 } values %times), 0, 'no span was exported twice')
  or diag explain [ grep { $times{$_} > 1 } keys %times ];
my $local_total = $node->safe_psql('postgres',
	"SELECT count(*) FROM df.instances i, df.instance_spans(i.id) s WHERE s.end_time IS NOT NULL");
is(scalar(keys %times), $local_total, 'every span of every instance was exported');

# --- 5. the OpenTelemetry JavaScript SDK continues the trace ------------------
my $node_dir = "$FindBin::RealBin/../otel-node";
SKIP:
{
	skip 'node or test/otel-node/node_modules missing (npm ci in test/otel-node)', 5
	  unless -d "$node_dir/node_modules" && system('node --version >/dev/null 2>&1') == 0;
	my ($node_port, $pid) = start_server('node_service', 1, 'node', "$node_dir/service.js", 'PORT_FILE', $otlp);
	ok(defined $node_port, 'the Node service started')
	  or diag slurp_file("$PostgreSQL::Test::Utils::log_path/node_service.log");
	my $id_node = start_as_user(qq{df.start(df.http('http://localhost:$node_port/orders') |=> 'order',
		'interop', traceparent => '00-$trace-$caller_span-01')});
	wait_status($id_node, 'completed');
	my $client = $node->safe_psql('postgres', "SELECT span_id FROM df.instance_spans('$id_node') WHERE kind = 'CLIENT'");
	my $theirs;
	for (my $i = 0; $i < 300 && !$theirs; $i++)
	{
		($theirs) = grep { ($_->{service} // '') eq 'node-service' } @{ http_get($otlp, '/spans') };
		usleep(100_000) unless $theirs;
	}
	kill 'TERM', $pid;
	waitpid($pid, 0);
	ok($theirs, "the Node service's span reached the collector") or next;
	is($theirs->{trace_id}, $trace, 'in our trace');
	is($theirs->{parent_span_id}, $client, 'its parent is our CLIENT span');
}

done_testing();

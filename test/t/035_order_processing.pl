# The OrderProcessing example end to end: the workflow of
# examples/order_processing/workflow.sql against the four services of
# examples/order_processing/services.pl, with a span receiver, under the
# these faults:
#  1. happy path: every effect once, one trace, each service's incoming
#     traceparent names one of the engine's HTTP client spans;
#  2. a declined payment: release, then cancel; no refund, no shipment;
#  3. an undo that fails twice, then succeeds;
#  4. inventory down: the breaker opens, later orders fail fast with
#     circuit_open without calling inventory and are compensated; once it
#     is back, one probe closes the breaker;
#  5. one order submitted 5 times, in turn and at once: one instance, one
#     charge; the HTTP worker killed during the charge: still one charge;
#  6. shipping slow: the timeout fires and compensation undoes everything,
#     the shipment the service made late included;
#  7. orders for {B,A} and {A,B} at once: no deadlock, the fencing tokens
#     the inventory service saw grow per SKU;
#  8. chaos: orders under random faults and SIGKILLs of executors and the
#     HTTP worker: each ends completed (every effect once) or compensated
#     (nothing left in any ledger); nothing stranded; df.check() clean;
#  9. the same with payment and shipping made by Python worker processes
#     (workers.py, the example's workers mode), SIGKILLed at random while
#     they hold a task: every order ends as in 8, no effect doubled.
use strict;
use warnings;
use FindBin;
use lib "$FindBin::RealBin/../perl";
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(usleep time);
use HTTP::Tiny;
use JSON::PP;
use IPC::Run;
use PgDurableTest;

my $example = "$FindBin::RealBin/../../examples/order_processing";
my $json = JSON::PP->new->canonical(1)->utf8(1);
my $http = HTTP::Tiny->new(timeout => 10);

# --- the services and the span receiver --------------------------------
my ($ports_json) = start_server('services', 0, $^X, "$example/services.pl", '--port-file', 'PORT_FILE',
	'--parent', $$);
my $ports = $json->decode($ports_json);
my %url = map { $_ => "http://localhost:$ports->{$_}" } keys %$ports;
my ($otlp, $otlp_pid) = start_otlp_receiver(0, "$PostgreSQL::Test::Utils::tmp_check/spans.jsonl");

my $node = engine_cluster('orders', 4, qq{
pg_durable.http_allow_private = on
pg_durable.otel_endpoint = '$otlp'
pg_durable.otel_service_name = 'order-processing'
});
$node->safe_psql('postgres', 'CREATE EXTENSION pg_durable');
wait_engine_ready($node, 4);
{
	my ($out, $err) = ('', '');
	IPC::Run::run([ 'psql', '-XAtq', '-v', 'ON_ERROR_STOP=1', '-d', $node->connstr('postgres'),
			(map { ('-v', "${_}_url=$url{$_}") } qw(order payment inventory shipping)),
			'-f', "$example/workflow.sql" ], '<', \undef, '>', \$out, '2>', \$err)
	  or die "workflow.sql: $err";
}

sub svc
{
	my ($service, $path, $body) = @_;
	my $r = defined $body
	  ? $http->post("$url{$service}$path", { content => $body })
	  : $http->get("$url{$service}$path");
	die "$service $path: $r->{status} $r->{content}" unless $r->{success};
	return $json->decode($r->{content});
}
sub fault { svc($_[0], '/_fault', $_[1]); }
sub entries { return @{ svc($_[0], '/_ledger')->{entries} }; }

# the ledger entries of an order: "service op" each, in the order they were
# made; from the ledgers given ({service => [entries]}) or the services'
sub effects_of
{
	my ($order, $ledgers) = @_;
	my @e;
	for my $s (qw(order payment inventory shipping))
	{
		push @e, map { [ $_->{at}, "$s $_->{op}" . (defined $_->{sku} ? " $_->{sku}" : '') ] }
		  grep { $_->{order_id} eq $order } ($ledgers ? @{ $ledgers->{$s} } : entries($s));
	}
	return map { $_->[1] } sort { $a->[0] <=> $b->[0] } @e;
}
sub count_of { my ($op, @e) = @_; return scalar grep { $_ eq $op } @e; }

sub order_json
{
	my ($id, %o) = @_;
	my @lines = map { { sku => $_, qty => 1 } } @{ $o{skus} // ['A'] };
	return $json->encode({ order_id => $id, customer => "c-$id", card => $o{card} // 'ok',
		amount => 25, lines => \@lines });
}

sub place
{
	my ($id, %o) = @_;
	my $doc = order_json($id, %o);
	$doc =~ s/'/''/g;
	my $iid = $node->safe_psql('postgres', "SET ROLE shop; SELECT shop.place('$doc')");
	die "shop.place returned '$iid'" unless $iid =~ /^[0-9a-f]{8}$/;
	return $iid;
}

sub status { return $node->safe_psql('postgres', "SELECT status FROM df.instances WHERE id = '$_[0]'"); }

sub wait_ended
{
	my (@ids) = @_;
	my $list = join(',', map { "'$_'" } @ids);
	return query_until($node,
		"SELECT count(*) = 0 FROM df.instances WHERE id IN ($list) "
		  . "AND status NOT IN ('completed', 'compensated', 'failed', 'cancelled')");
}

my @happy = ('order create', 'inventory reserve A', 'inventory reserve B', 'payment charge',
	'shipping ship', 'order confirm');

# --- 1. the happy path ----------------------------------------------------
my $o1 = place('o1', skus => [ 'A', 'B' ]);
ok(wait_ended($o1), 'o1 ended');
is(status($o1), 'completed', 'o1 completed');
is_deeply([ effects_of('o1') ], \@happy, 'o1: every effect once, in order, no undo');
ok(query_until($node, "SELECT EXISTS (SELECT FROM shop.notifications WHERE order_id = 'o1')"),
	'the order.completed subscription notified o1');
{
	my $trace = $node->safe_psql('postgres', "SELECT trace_id FROM df.instances WHERE id = '$o1'");
	my %client = map { $_ => 1 } split /\n/, $node->safe_psql('postgres',
		"SELECT span_id FROM df.instance_spans('$o1') WHERE kind = 'CLIENT'");
	my @incoming;
	for my $s (qw(order payment inventory shipping))
	{
		push @incoming, grep { ($_->{key} // '') =~ /^o1:/ } @{ svc($s, '/_log') };
	}
	is(scalar @incoming, 5, 'o1 made five calls');
	is(scalar(grep { ($_->{traceparent} // '') =~ /^00-\Q$trace\E-([0-9a-f]{16})-0[01]$/ && $client{$1} } @incoming),
		5, 'each call carried the instance\'s trace and one of its HTTP client spans as parent');
	ok(eventually(sub {
				my %got = map { $_->{span_id} => 1 } grep { $_->{trace_id} eq $trace } @{ http_get($otlp, '/spans') };
				return !grep { !$got{$_} } keys %client;
			}), 'the receiver got the client spans of o1\'s trace');
}

# a condition polled with a deadline
sub eventually
{
	my ($cond) = @_;
	my $deadline = time() + $PostgreSQL::Test::Utils::timeout_default;
	while (time() < $deadline)
	{
		return 1 if $cond->();
		usleep(100_000);
	}
	return 0;
}

# --- 2. a declined payment ------------------------------------------------
my $o2 = place('o2', card => 'declined');
ok(wait_ended($o2), 'o2 ended');
is(status($o2), 'compensated', 'o2 (declined) compensated');
is_deeply([ effects_of('o2') ], [ 'order create', 'inventory reserve A', 'inventory release A', 'order cancel' ],
	'o2: release, then cancel; no charge, refund or shipment');

# --- 3. an undo that fails twice, then succeeds ----------------------------
fault('inventory', '{"mode": "undo_fail", "n": 2}');
my $o3 = place('o3', card => 'declined');
ok(wait_ended($o3), 'o3 ended');
is(status($o3), 'compensated', 'o3 compensated although its release failed twice');
is(scalar(grep { $_->{path} eq '/releases' && ($_->{key} // '') eq 'o3:release' } @{ svc('inventory', '/_log') }),
	3, 'the release was sent three times, with one key');
is_deeply([ effects_of('o3') ], [ 'order create', 'inventory reserve A', 'inventory release A', 'order cancel' ],
	'o3: released once, then cancelled');
fault('inventory', '{"mode": "ok"}');

# --- 4. inventory down: the breaker ---------------------------------------
fault('inventory', '{"mode": "down"}');
my ($opened_after, @down) = (0);
for my $i (1 .. 8)
{
	my $id = place("d$i");
	ok(wait_ended($id), "d$i ended");
	push @down, $id;
	if (!$opened_after
		&& $node->safe_psql('postgres', "SELECT state FROM df.circuit_breakers WHERE name = 'inventory'") eq 'open')
	{
		$opened_after = $i;
		last;
	}
}
ok($opened_after >= 1, "the breaker opened during failed order $opened_after");
my $calls = svc('inventory', '/_stats')->{requests};
for my $i (1 .. 2)
{
	my $id = place("f$i");
	ok(wait_ended($id), "f$i ended");
	push @down, $id;
	like($node->safe_psql('postgres',
			"SELECT string_agg(concat(error, status_details::text), ' ') FROM df.nodes WHERE instance_id = '$id'"),
		qr/circuit_open|circuit breaker "inventory" is open/, "f$i failed fast with circuit_open");
}
is(svc('inventory', '/_stats')->{requests}, $calls, 'inventory got no call while the breaker was open');
is(scalar(grep { status($_) eq 'compensated' } @down), scalar @down, 'every order of the outage was compensated');
for my $i (1 .. $opened_after) { is_deeply([ effects_of("d$i") ], [ 'order create', 'order cancel' ], "d$i: created, then cancelled"); }
fault('inventory', '{"mode": "ok"}');
ok(query_until($node, "SELECT state <> 'open' FROM df.circuit_breakers WHERE name = 'inventory'"),
	'the breaker let a probe through after its wait');
my $probe = place('p1');
ok(wait_ended($probe), 'p1 ended');
is(status($probe), 'completed', 'p1, the probe, completed');
is($node->safe_psql('postgres', "SELECT state FROM df.circuit_breakers WHERE name = 'inventory'"), 'closed',
	'the breaker closed after the probe');

# --- 5. duplicates ----------------------------------------------------------
{
	my @ids = map { place('dup1') } 1 .. 5;
	is(scalar(keys %{ { map { $_ => 1 } @ids } }), 1, 'dup1 placed 5 times in turn: one instance');
	my $doc = order_json('dup2');
	$doc =~ s/'/''/g;
	my @h = map {
		my ($out, $err) = ('', '');
		[ IPC::Run::start([ 'psql', '-XAtq', '-d', $node->connstr('postgres'), '-c',
					"SET ROLE shop; SELECT shop.place('$doc')" ], '<', \undef, '>', \$out, '2>', \$err),
		  \$out ]
	} 1 .. 5;
	$_->[0]->finish for @h;
	my %dup2 = map { my $o = ${ $_->[1] }; chomp $o; $o => 1 } @h;
	is(scalar keys %dup2, 1, 'dup2 placed from 5 sessions at once: one instance');
	ok(wait_ended($ids[0], keys %dup2), 'dup1 and dup2 ended');
	is(count_of('payment charge', effects_of('dup1')), 1, 'dup1 charged once');
	is(count_of('payment charge', effects_of('dup2')), 1, 'dup2 charged once');

	# the HTTP worker dies while the charge is in flight
	fault('payment', '{"mode": "slow", "ms": 3000}');
	my $id = place('dup3');
	ok(eventually(sub { grep { ($_->{key} // '') eq 'dup3:charge' } @{ svc('payment', '/_log') } }),
		'the charge of dup3 reached the payment service');
	my $pid = $node->safe_psql('postgres',
		"SELECT pid FROM pg_stat_activity WHERE backend_type = 'pg_durable http worker'");
	ok($pid =~ /^\d+$/ && kill('KILL', $pid), 'the HTTP worker was killed during the charge');
	fault('payment', '{"mode": "ok"}');
	ok(query_until($node, "SELECT status IN ('completed', 'compensated') FROM df.instances WHERE id = '$id'"),
		'dup3 ended after the crash');
	is(status($id), 'completed', 'dup3 completed');
	ok(scalar(grep { ($_->{key} // '') eq 'dup3:charge' } @{ svc('payment', '/_log') }) >= 2,
		'the charge was sent again after the crash, with the same key');
	is(count_of('payment charge', effects_of('dup3')), 1, 'dup3 charged once');
}

# --- 6. shipping slow: the timeout ------------------------------------------
{
	fault('shipping', '{"mode": "slow", "ms": 6000}');
	my $id = place('slow1');
	ok(wait_ended($id), 'slow1 ended');
	is(status($id), 'compensated', 'slow1 compensated after its shipment timed out');
	fault('shipping', '{"mode": "ok"}');
	my @e = effects_of('slow1');
	is_deeply([ sort @e ], [ sort('order create', 'inventory reserve A', 'payment charge', 'shipping ship',
				'shipping unship', 'payment refund', 'inventory release A', 'order cancel') ],
		'slow1: the late shipment deleted, the charge refunded, the stock released, the order cancelled');
	like($node->safe_psql('postgres',
			"SELECT string_agg(concat(error, status_details::text), ' ') FROM df.nodes "
			  . "WHERE instance_id = '$id' AND node_type = 'TIMEOUT'"),
		qr/timeout/, 'the TIMEOUT node failed with kind timeout');
}

# --- 7. opposite SKU orders at once: one lock order ---------------------------
{
	my @docs = map { order_json("lk$_", skus => ($_ % 2 ? [ 'B', 'A' ] : [ 'A', 'B' ])) } 1 .. 12;
	s/'/''/g for @docs;
	my $ids = $node->safe_psql('postgres',
		"SET ROLE shop; SELECT string_agg(shop.place(d::jsonb), ',') FROM unnest(ARRAY['"
		  . join("','", @docs) . "']) d");
	my @ids = split /,/, $ids;
	ok(wait_ended(@ids), 'the 12 orders for {A,B} and {B,A} ended');
	is(scalar(grep { status($_) eq 'completed' } @ids), 12, 'every one completed: no deadlock');
	my %last;
	my $ok = 1;
	for my $e (entries('inventory'))
	{
		next unless $e->{op} eq 'reserve' && $e->{order_id} =~ /^lk/;
		$ok = 0 unless defined $e->{fence} && $e->{fence} > ($last{ $e->{sku} } // 0);
		$last{ $e->{sku} } = $e->{fence} // 0;
	}
	ok($ok, 'the fencing tokens the inventory service saw grow per SKU');
}
check_df_clean($node, 'the scenarios');

# Every order of ids ended well: completed with each effect once (lines_of
# its number of lines, of the SKUs many and one, one line of one), or
# compensated to nothing, or failed at its first call with no effect.
sub check_orders
{
	my ($what, $ids, $order_of, $lines_of, $many, $one) = @_;
	my ($good, $undone, $rejected, @bad) = (0, 0, 0);
	my %ledgers = map { $_ => [ entries($_) ] } qw(order payment inventory shipping);
	for my $id (@$ids)
	{
		my $o = $order_of->{$id};
		my @e = effects_of($o, \%ledgers);
		my $st = status($id);
		my %n;
		$n{$_}++ for @e;
		if ($st eq 'completed')
		{
			my $lines = $lines_of->{$id};
			my $ok = ($n{'order create'} // 0) == 1 && ($n{'order confirm'} // 0) == 1
			  && ($n{'payment charge'} // 0) == 1 && ($n{'shipping ship'} // 0) == 1
			  && ($n{"inventory reserve $one"} // 0) == 1
			  && ($n{"inventory reserve $many"} // 0) == $lines - 1 && scalar(@e) == 4 + $lines;
			$ok ? $good++ : push @bad, "$o completed: @e";
		}
		elsif ($st eq 'failed')
		{
			# its first call failed for good: nothing was done, nothing to undo
			@e ? push @bad, "$o failed: @e" : $rejected++;
		}
		else
		{
			my $ok = ($n{'order create'} // 0) == ($n{'order cancel'} // 0)
			  && ($n{'payment charge'} // 0) == ($n{'payment refund'} // 0)
			  && ($n{'shipping ship'} // 0) == ($n{'shipping unship'} // 0)
			  && ($n{"inventory reserve $many"} // 0) == ($n{"inventory release $many"} // 0)
			  && ($n{"inventory reserve $one"} // 0) == ($n{"inventory release $one"} // 0)
			  && !$n{'order confirm'};
			$ok ? $undone++ : push @bad, "$o $st: @e";
		}
	}
	is(scalar @bad, 0, "$what: $good orders completed with every effect once, $undone compensated "
		  . "to nothing, $rejected failed before any effect")
	  or diag join("\n", @bad);
	return "$good completed, $undone compensated, $rejected failed at their first call";
}

# --- 8. chaos -----------------------------------------------------------------
{
	my @faults = ('{"mode": "fail_next", "n": 2}', '{"mode": "ratelimit", "n": 2, "retry_after": 1}',
		'{"mode": "slow", "ms": 400}', '{"mode": "undo_fail", "n": 1}', '{"mode": "down"}');
	my @services = qw(order payment inventory shipping);
	my (@ids, %order_of, %lines_of);
	my $kills = 0;
	srand(20);
	for my $i (1 .. 100)
	{
		my $card = rand() < 0.15 ? 'declined' : 'ok';
		my $skus = rand() < 0.5 ? [ 'C', 'D' ] : [ 'D' ];
		my $id = eval { place("x$i", card => $card, skus => $skus) };
		if (!defined $id)
		{
			# the server was restarting after a kill: try again once it is back
			ok(query_until($node, 'SELECT true'), 'the server is back');
			$id = place("x$i", card => $card, skus => $skus);
		}
		push @ids, $id;
		$order_of{$id} = "x$i";
		$lines_of{$id} = scalar @$skus;
		if ($i % 5 == 0)
		{
			my $s = $services[ int(rand(@services)) ];
			fault($_, '{"mode": "ok"}') for @services;
			fault($s, $faults[ int(rand(@faults)) ]);
		}
		if ($i % 20 == 10)
		{
			my $type = $kills++ % 2 ? 'pg_durable http worker' : 'pg_durable executor';
			my $pid = $node->safe_psql('postgres',
				"SELECT pid FROM pg_stat_activity WHERE backend_type = '$type' LIMIT 1");
			kill('KILL', $pid) if $pid =~ /^\d+$/;
			ok(query_until($node,
					"SELECT count(*) = 5 FROM pg_stat_activity WHERE backend_type IN "
					  . "('pg_durable executor', 'pg_durable http worker') AND pid <> " . ($pid || 0)),
				"the engine came back after killing the $type");
		}
	}
	fault($_, '{"mode": "ok"}') for @services;
	$node->safe_psql('postgres', "SET ROLE shop; SELECT df.reset_circuit_breaker('inventory')");
	my $list = join(',', map { "'$_'" } @ids);
	ok(query_until($node, "SELECT count(*) = 0 FROM df.instances WHERE id IN ($list) "
			  . "AND status NOT IN ('completed', 'compensated', 'failed')"),
		'every chaos order ended')
	  or diag $node->safe_psql('postgres',
		"SELECT i.id, i.status, n.node_type, n.status, left(concat(n.error, n.status_details::text), 300) "
		  . "FROM df.instances i JOIN df.nodes n ON n.instance_id = i.id AND n.id = i.root_node "
		  . "WHERE i.id IN ($list) AND i.status NOT IN ('completed', 'compensated')");
	my $kinds = check_orders('chaos', \@ids, \%order_of, \%lines_of, 'C', 'D');
	note("chaos: $kinds, $kills processes killed");
	is($node->safe_psql('postgres', "SELECT count(*) FROM df_internal.tasks t JOIN df.instances i ON i.id = t.instance_id "
			  . "WHERE i.status IN ('completed', 'compensated')"), '0', 'no task left of an ended order');
	check_df_clean($node, 'the chaos');
}

# --- 9. chaos with external workers -------------------------------------------
# The payment and shipping calls become TASK steps (the example's workers
# mode) that Python worker processes (workers.py) claim and make; while
# orders run under random faults, a worker holding a payment task is
# SIGKILLed and another one started.  Its tasks are tried again after
# their leases, with the same idempotency keys.
{
	my $python = '/usr/bin/python3';
	my $ports_file = "$PostgreSQL::Test::Utils::tmp_check/ports.json";
	PostgreSQL::Test::Utils::append_to_file($ports_file, $ports_json);
	$node->safe_psql('postgres', q{
CREATE ROLE shop_worker LOGIN;
SELECT df.grant_worker('shop_worker', 'shop.*');
SET ROLE shop;
UPDATE shop.services SET url = 'task:' WHERE name IN ('payment', 'shipping');
});
	my $conninfo = $node->connstr('postgres') . ' user=shop_worker';
	my %workers;
	my $start_worker = sub {
		my $pid = fork() // die "fork: $!";
		if ($pid == 0)
		{
			open(STDOUT, '>>', "$PostgreSQL::Test::Utils::log_path/workers.log");
			open(STDERR, '>&', \*STDOUT);
			exec($python, "$example/workers.py", $ports_file, $conninfo, 'shop.payment', 'shop.shipping')
			  or die "exec: $!";
		}
		$workers{$pid} = 1;
	};
	ok(system($python, '-c', 'import psycopg') == 0, "$python has psycopg (python3-psycopg)");
	$start_worker->() for 1 .. 3;
	ok(query_until($node, "SELECT count(*) = 3 FROM pg_stat_activity WHERE usename = 'shop_worker' "
			  . "AND query LIKE 'LISTEN%'"),
		'three workers are listening');

	my @faults = ('{"mode": "fail_next", "n": 2}', '{"mode": "ratelimit", "n": 2, "retry_after": 1}',
		'{"mode": "slow", "ms": 400}', '{"mode": "undo_fail", "n": 1}');
	my @services = qw(order payment inventory shipping);
	my (@ids, %order_of, %lines_of, @killed_tasks);
	my $kills = 0;
	srand(9);
	my $n = 0;
	my $place = sub {
		my $skus = rand() < 0.5 ? [ 'E', 'F' ] : [ 'F' ];
		$n++;
		my $id = place("w$n", card => rand() < 0.15 ? 'declined' : 'ok', skus => $skus);
		push @ids, $id;
		$order_of{$id} = "w$n";
		$lines_of{$id} = scalar @$skus;
	};
	# a live worker that holds a payment task now, chosen at random, is
	# killed; the payment tasks it still held when it died (the slow
	# payment service keeps them held, a shipping task may time out
	# first) are the ones another worker must take over
	my $kill_one = sub {
		my @holders = grep { $workers{ $_->[1] } }
		  map { [ /^(.*:(\d+))$/ ] } split /\n/, $node->safe_psql('postgres',
			"SELECT DISTINCT worker FROM df.tasks WHERE queue = 'shop.payment' AND state = 'leased'");
		return 0 unless @holders;
		my ($worker, $pid) = @{ $holders[ int(rand(@holders)) ] };
		kill('KILL', $pid);
		waitpid($pid, 0);
		delete $workers{$pid};
		$start_worker->();
		my @held = split /\n/, $node->safe_psql('postgres',
			"SELECT task_id || ':' || attempt FROM df.tasks WHERE queue = 'shop.payment' "
			  . "AND state = 'leased' AND worker = '$worker'");
		return 0 unless @held;
		push @killed_tasks, @held;
		$kills++;
		return 1;
	};
	fault('payment', '{"mode": "slow", "ms": 300}');
	my $due = 0;
	for my $i (1 .. 30)
	{
		$place->();
		if ($i % 6 == 0)
		{
			my $s = $services[ int(rand(@services)) ];
			fault($_, '{"mode": "ok"}') for @services;
			fault('payment', '{"mode": "slow", "ms": 300}');
			fault($s, $faults[ int(rand(@faults)) ]);
		}
		# a kill is due every 6 orders, done when a task is held
		$due++ if $i % 6 == 2;
		$due-- if $due && $kill_one->();
	}
	# the last kills due: more orders, with no fault, until some task is held
	fault($_, '{"mode": "ok"}') for @services;
	fault('payment', '{"mode": "slow", "ms": 300}');
	$node->safe_psql('postgres', "SET ROLE shop; SELECT df.reset_circuit_breaker('inventory')");
	for (my $extra = 0; $due && $extra < 20; $extra++)
	{
		$place->();
		usleep(200_000);
		$due-- if $kill_one->();
	}
	fault($_, '{"mode": "ok"}') for @services;
	$node->safe_psql('postgres', "SET ROLE shop; SELECT df.reset_circuit_breaker('inventory')");
	my $list = join(',', map { "'$_'" } @ids);
	ok(query_until($node, "SELECT count(*) = 0 FROM df.instances WHERE id IN ($list) "
			  . "AND status NOT IN ('completed', 'compensated', 'failed')"),
		'every order of the workers\' chaos ended')
	  or diag $node->safe_psql('postgres',
		"SELECT x.instance_id, x.queue, x.state, x.attempt, x.worker FROM df_internal.external_tasks x "
		  . "WHERE x.instance_id IN ($list) AND x.state IN ('ready', 'leased')");
	is($kills, 5, 'five workers were killed while they held a task');
	# a task held by a killed worker: a later attempt, another worker's,
	# ended it (its lease expired; the payment's df.retry tried it again)
	# (a task's later attempt may be held by a worker killed in turn)
	my %last_killed;
	for (@killed_tasks)
	{
		my ($t, $a) = split /:/;
		$last_killed{$t} = $a if ($last_killed{$t} // 0) < $a;
	}
	my $killed = join(' OR ', map { "(task_id = $_ AND attempt > $last_killed{$_})" }
		  sort keys %last_killed) || 'false';
	is($node->safe_psql('postgres', "SELECT count(*) FROM df_internal.external_tasks "
			  . "WHERE ($killed) AND state IN ('completed', 'failed')"), scalar(keys %last_killed),
		'every payment task of the killed workers was taken over after its lease and ended')
	  or diag join(' ', @killed_tasks) . "\n" . $node->safe_psql('postgres',
		"SELECT task_id, state, attempt, worker, lease_expiries FROM df_internal.external_tasks "
		  . "WHERE task_id IN (" . (join(',', map { (split /:/)[0] } @killed_tasks) || 'NULL') . ")");
	# a call made again (a retry, a killed worker's task taken over) carries
	# the key of the first: the services' idempotency is what keeps the
	# ledgers right, whatever their own checks
	my %keys;
	for my $s (qw(payment shipping))
	{
		for my $call (@{ svc($s, '/_log') })
		{
			my ($order) = ($call->{key} // '') =~ /^(w\d+):/ or next;
			$keys{"$s $call->{path} $order"}{ $call->{key} } = 1;
		}
	}
	is(scalar(grep { keys %{ $keys{$_} } > 1 } keys %keys), 0,
		'every call of a task to the payment and shipping services carried one key');
	my $kinds = check_orders('chaos with workers', \@ids, \%order_of, \%lines_of, 'E', 'F');
	note("chaos with workers: $kinds, $kills workers killed");
	is($node->safe_psql('postgres', "SELECT count(*) FROM df_internal.external_tasks x "
			  . "JOIN df.instances i ON i.id = x.instance_id "
			  . "WHERE x.instance_id IN ($list) AND x.state IN ('ready', 'leased')"),
		'0', 'no task ready or leased of an ended order');
	kill('KILL', keys %workers);
	waitpid($_, 0) for keys %workers;
	check_df_clean($node, 'the chaos with workers');
}

done_testing();

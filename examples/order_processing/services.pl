#!/usr/bin/perl
# The four services of the OrderProcessing example in one
# process: order, payment, inventory and shipping, each on its own
# loopback port, each with forward and undo endpoints, deduplication by
# Idempotency-Key, a ledger of its effects, a request log and a fault
# switch.  Perl core modules only.
#
#   services.pl [--port-file FILE] [--parent PID] [--stock N]
#
# FILE gets {"order":P,"payment":P,"inventory":P,"shipping":P}.
#
# Business endpoints (POST, JSON bodies; every one answers JSON):
#   order      /orders {order_id, customer, lines, amount}   create (201)
#              /orders/cancel {order_id}                      undo of create
#              /orders/confirm {order_id}                     409 when cancelled
#   payment    /charges {order_id, amount, card}              201, or 402 when
#                                                             declined (card
#                                                             "declined", or the
#                                                             decline fault)
#              /refunds {order_id}                            undo of a charge
#   inventory  /reservations {order_id, lines:[{sku,qty}],    201, 409 out of stock;
#              fence}                                         fence (a lock's token) kept
#              /releases {order_id}                           undo of a reservation
#   shipping   /shipments {order_id, address}                 201
#              /shipments/delete {order_id}                   undo of a shipment
# An undo of something never done (or already undone) answers 200 with
# "noop": true and records nothing, so compensations are safe to repeat.
#
# Every service also has (not logged, never faulted):
#   GET  /_ledger    {"entries":[{op, order_id, amount|sku,qty, key}], "totals":{op:{n,sum}}}
#   GET  /_log       [{method, path, key, traceparent, tracestate, status, at}]
#                    (?path=P: those whose path starts with P)
#   GET  /_stats     {"requests":N, "held":N, "aborted":N}
#   POST /_fault     {"mode": "ok" | "down" | "fail_next" | "ratelimit" | "slow"
#                     | "hang" | "decline" | "undo_fail", "n": N, "ms": MS,
#                     "retry_after": S}
#                    down: 503 always; fail_next: 503 for the next n calls;
#                    ratelimit: 429 with Retry-After (n calls, or always
#                    without n); slow: answer after ms (the effect happens at
#                    once); hang: never answer; decline: payment's charges
#                    402; undo_fail: the next n undo calls 500
#   POST /_reset     forget ledger, log, keys, stock and fault
# A replayed key answers what the first call answered, with
# "Idempotent-Replayed: true", and changes nothing.  Answers of 5xx and
# 429 are not kept: such a call had no effect and may be sent again.
use strict;
use warnings;
use FindBin;
use lib "$FindBin::RealBin/../../test/perl";
use Getopt::Long;
use JSON::PP;
use Time::HiRes qw(time);
use MiniHttpd;

my ($port_file, $parent, $stock0) = (undef, undef, 1000);
GetOptions('port-file=s' => \$port_file, 'parent=i' => \$parent, 'stock=i' => \$stock0)
  or die "usage: $0 [--port-file FILE] [--parent PID] [--stock N]\n";

my $json = JSON::PP->new->canonical(1)->utf8(1);
my @NAMES = qw(order payment inventory shipping);
my %svc;

sub fresh
{
	return { entries => [], log => [], keys => {}, fault => { mode => 'ok' },
		requests => 0, orders => {}, charges => {}, reservations => {},
		shipments => {}, stock => {}, next_id => 1 };
}
$svc{$_} = fresh() for @NAMES;

my $srv = MiniHttpd->new(parent => $parent);
my %ports = map { $_ => $srv->listen($_, 0) } @NAMES;
if (defined $port_file)
{
	open(my $fh, '>', "$port_file.tmp") or die "$port_file: $!";
	print $fh $json->encode(\%ports), "\n";
	close $fh;
	rename("$port_file.tmp", $port_file) or die "rename: $!";
}
print STDERR "services: ", join(', ', map { "$_ 127.0.0.1:$ports{$_}" } @NAMES), "\n";

sub answer
{
	my ($status, $doc, @extra) = @_;
	return [ $status, [ [ 'Content-Type', 'application/json' ], @extra ], $json->encode($doc) ];
}

sub record
{
	my ($s, $key, %e) = @_;
	push @{ $s->{entries} }, { %e, key => $key, at => time };
}

# --- the business of each service: (service state, path, body, key) -> answer
sub order_service
{
	my ($s, $path, $b, $key) = @_;
	my $id = $b->{order_id};
	return answer(422, { error => 'order_id is required' }) unless defined $id && length $id;
	my $o = $s->{orders}{$id};
	if ($path eq '/orders')
	{
		return answer(200, { order_id => $id, status => $o->{status} }) if $o;
		$s->{orders}{$id} = { status => 'created' };
		record($s, $key, op => 'create', order_id => $id, amount => $b->{amount});
		return answer(201, { order_id => $id, status => 'created' });
	}
	if ($path eq '/orders/cancel')
	{
		return answer(200, { order_id => $id, noop => JSON::PP::true })
		  unless $o && $o->{status} ne 'cancelled';
		$o->{status} = 'cancelled';
		record($s, $key, op => 'cancel', order_id => $id);
		return answer(200, { order_id => $id, status => 'cancelled' });
	}
	if ($path eq '/orders/confirm')
	{
		return answer(404, { error => "no order $id" }) unless $o;
		return answer(409, { error => "order $id is cancelled" }) if $o->{status} eq 'cancelled';
		return answer(200, { order_id => $id, status => 'confirmed' }) if $o->{status} eq 'confirmed';
		$o->{status} = 'confirmed';
		record($s, $key, op => 'confirm', order_id => $id);
		return answer(200, { order_id => $id, status => 'confirmed' });
	}
	return undef;
}

sub payment_service
{
	my ($s, $path, $b, $key) = @_;
	my $id = $b->{order_id};
	return answer(422, { error => 'order_id is required' }) unless defined $id && length $id;
	if ($path eq '/charges')
	{
		my $amount = $b->{amount} // 0;
		return answer(422, { error => 'amount must be a positive number' })
		  unless $amount =~ /^\d+(\.\d+)?$/ && $amount > 0;
		return answer(402, { error => 'card_declined', order_id => $id })
		  if $s->{fault}{mode} eq 'decline' || ($b->{card} // '') eq 'declined';
		my $c = $s->{charges}{$id};
		return answer(200, { charge_id => $c->{charge_id}, order_id => $id, amount => $c->{amount} })
		  if $c && !$c->{refunded};
		my $cid = 'ch_' . $s->{next_id}++;
		$s->{charges}{$id} = { charge_id => $cid, amount => $amount };
		record($s, $key, op => 'charge', order_id => $id, amount => $amount);
		return answer(201, { charge_id => $cid, order_id => $id, amount => $amount });
	}
	if ($path eq '/refunds')
	{
		my $c = $s->{charges}{$id};
		return answer(200, { order_id => $id, noop => JSON::PP::true }) unless $c && !$c->{refunded};
		$c->{refunded} = 1;
		record($s, $key, op => 'refund', order_id => $id, amount => $c->{amount});
		return answer(200, { order_id => $id, refunded => $c->{amount} });
	}
	return undef;
}

sub inventory_service
{
	my ($s, $path, $b, $key) = @_;
	my $id = $b->{order_id};
	return answer(422, { error => 'order_id is required' }) unless defined $id && length $id;
	if ($path eq '/reservations')
	{
		my $lines = $b->{lines};
		return answer(422, { error => 'lines must be a non-empty array of {sku, qty}' })
		  unless ref $lines eq 'ARRAY' && @$lines
		  && !grep { ref $_ ne 'HASH' || !defined $_->{sku} || ($_->{qty} // '') !~ /^[1-9]\d*$/ } @$lines;
		my $r = $s->{reservations}{$id};
		return answer(200, { order_id => $id, lines => $r->{lines} }) if $r && !$r->{released};
		for my $l (@$lines)
		{
			my $have = $s->{stock}{ $l->{sku} } //= $stock0;
			return answer(409, { error => 'out_of_stock', sku => $l->{sku}, available => $have })
			  if $have < $l->{qty};
		}
		for my $l (@$lines)
		{
			$s->{stock}{ $l->{sku} } -= $l->{qty};
			record($s, $key, op => 'reserve', order_id => $id, sku => $l->{sku}, qty => $l->{qty},
				fence => $b->{fence});
		}
		$s->{reservations}{$id} = { lines => $lines };
		return answer(201, { order_id => $id, lines => $lines });
	}
	if ($path eq '/releases')
	{
		my $r = $s->{reservations}{$id};
		return answer(200, { order_id => $id, noop => JSON::PP::true }) unless $r && !$r->{released};
		$r->{released} = 1;
		for my $l (@{ $r->{lines} })
		{
			$s->{stock}{ $l->{sku} } += $l->{qty};
			record($s, $key, op => 'release', order_id => $id, sku => $l->{sku}, qty => $l->{qty});
		}
		return answer(200, { order_id => $id, released => $r->{lines} });
	}
	return undef;
}

sub shipping_service
{
	my ($s, $path, $b, $key) = @_;
	my $id = $b->{order_id};
	return answer(422, { error => 'order_id is required' }) unless defined $id && length $id;
	my $sh = $s->{shipments}{$id};
	if ($path eq '/shipments')
	{
		return answer(200, { order_id => $id, shipment_id => $sh->{shipment_id} })
		  if $sh && !$sh->{deleted};
		my $sid = 'sh_' . $s->{next_id}++;
		$s->{shipments}{$id} = { shipment_id => $sid };
		record($s, $key, op => 'ship', order_id => $id);
		return answer(201, { order_id => $id, shipment_id => $sid });
	}
	if ($path eq '/shipments/delete')
	{
		return answer(200, { order_id => $id, noop => JSON::PP::true }) unless $sh && !$sh->{deleted};
		$sh->{deleted} = 1;
		record($s, $key, op => 'unship', order_id => $id);
		return answer(200, { order_id => $id, deleted => $sh->{shipment_id} });
	}
	return undef;
}

my %BUSINESS = (order => \&order_service, payment => \&payment_service,
	inventory => \&inventory_service, shipping => \&shipping_service);
my %UNDO = map { $_ => 1 } qw(/orders/cancel /refunds /releases /shipments/delete);

sub totals
{
	my ($s) = @_;
	my %t;
	for my $e (@{ $s->{entries} })
	{
		$t{ $e->{op} }{n}++;
		$t{ $e->{op} }{sum} += $e->{amount} // $e->{qty} // 0;
	}
	return \%t;
}

sub admin
{
	my ($s, $name, $req) = @_;
	my $p = $req->{path};
	if ($p eq '/_ledger')
	{
		return answer(200, { service => $name, entries => $s->{entries}, totals => totals($s) });
	}
	if ($p eq '/_log')
	{
		my $prefix = $req->{query}{path} // '';
		return answer(200, [ grep { index($_->{path}, $prefix) == 0 } @{ $s->{log} } ]);
	}
	if ($p eq '/_stats')
	{
		my $held = grep { $_->{name} eq $name } $srv->held_connections;
		return answer(200, { service => $name, requests => $s->{requests}, held => $held,
			aborted => $srv->{aborted} });
	}
	if ($p eq '/_reset')
	{
		$svc{$name} = fresh();
		return answer(200, { service => $name, reset => JSON::PP::true });
	}
	if ($p eq '/_fault')
	{
		my $f = eval { $json->decode($req->{body} || '{}') };
		my %modes = map { $_ => 1 } qw(ok down fail_next ratelimit slow hang decline undo_fail);
		return answer(422, { error => 'the body must be {"mode": ...}' })
		  unless ref $f eq 'HASH' && defined $f->{mode} && $modes{ $f->{mode} };
		$s->{fault} = $f;
		return answer(200, { service => $name, fault => $f });
	}
	return answer(404, { error => "no such path $p" });
}

# A fault that answers instead of the service, or undef to go on.
sub fault_answer
{
	my ($s, $path) = @_;
	my $f = $s->{fault};
	my $m = $f->{mode};
	return answer(503, { error => 'service down' }) if $m eq 'down';
	if ($m eq 'fail_next' && ($f->{n} // 0) > 0)
	{
		$f->{n}--;
		return answer(503, { error => 'failing on purpose', left => $f->{n} });
	}
	if ($m eq 'ratelimit' && (!defined $f->{n} || $f->{n} > 0))
	{
		$f->{n}-- if defined $f->{n};
		return answer(429, { error => 'rate limited' }, [ 'Retry-After', $f->{retry_after} // 1 ]);
	}
	if ($m eq 'undo_fail' && $UNDO{$path} && ($f->{n} // 0) > 0)
	{
		$f->{n}--;
		return answer(500, { error => 'undo failing on purpose', left => $f->{n} });
	}
	return undef;
}

$srv->run(sub {
	my ($srv, $c, $name, $req) = @_;
	my $s = $svc{$name};
	my $path = $req->{path};
	if ($path =~ m{^/_})
	{
		$srv->respond($c, @{ admin($s, $name, $req) });
		return;
	}
	my $h = $req->{headers};
	my $key = $h->{'idempotency-key'};
	my $entry = { method => $req->{method}, path => $path, key => $key,
		traceparent => $h->{traceparent}, tracestate => $h->{tracestate}, at => time };
	push @{ $s->{log} }, $entry;
	$s->{requests}++;

	if ($s->{fault}{mode} eq 'hang')
	{
		$entry->{status} = 'held';
		$srv->hold($c);
		return;
	}
	my $a = fault_answer($s, $path);
	if (!$a && defined $key && $s->{keys}{"$path $key"})
	{
		my ($st, $hd, $body) = @{ $s->{keys}{"$path $key"} };
		$a = [ $st, [ @$hd, [ 'Idempotent-Replayed', 'true' ] ], $body ];
	}
	if (!$a)
	{
		my $b = eval { $json->decode($req->{body} || '{}') };
		if ($req->{method} ne 'POST') { $a = answer(404, { error => "POST $path only" }); }
		elsif (ref $b ne 'HASH') { $a = answer(400, { error => 'the body must be a JSON object' }); }
		else
		{
			$a = $BUSINESS{$name}->($s, $path, $b, $key)
			  // answer(404, { error => "no such path $path on $name" });
		}
		$s->{keys}{"$path $key"} = $a if defined $key && $a->[0] < 500 && $a->[0] != 429;
	}
	$entry->{status} = $a->[0];
	if ($s->{fault}{mode} eq 'slow') { $srv->respond_at($c, time + ($s->{fault}{ms} // 1000) / 1000, @$a); }
	else { $srv->respond($c, @$a); }
});

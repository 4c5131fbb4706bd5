#!/usr/bin/perl
# A small HTTP/1.1 server for pg_durable's HTTP tests and benchmark, on the
# socket loop of test/perl/MiniHttpd.pm (one process, non-blocking sockets
# and select(), so hundreds of slow requests can wait at once).  Perl core
# modules only.  It listens on 127.0.0.1 on a free port (or --port N),
# writes the port to --port-file and runs until killed (or until --parent
# PID is gone).
#
# Endpoints (any method):
#   /echo            200 application/json: method, path, query, headers
#                    (lower-case names), body (text, or null when not UTF-8),
#                    body_b64, body_len
#   /status/N        status N, text/plain "status N" (302 adds Location: /echo)
#   /delay/MS        200 text/plain after MS milliseconds
#   /bytes/N         200 text/plain, N bytes of "x"
#   /binary          200 application/octet-stream, the bytes 0..255
#   /binary-undeclared   the same bytes without a Content-Type
#   /utf8-undeclared     UTF-8 text without a Content-Type
#   /multi-header    two "X-Multi" headers
#   /barrier/N       held until N requests wait on /barrier/N at once, then
#                    200 "released"; 503 after ?t=MS (default 120000)
#   /log             200 application/json: every request so far (except /log,
#                    /stats, /reset): [{"method","path","key","traceparent"}]
#                    (key: the Idempotency-Key header or null; traceparent:
#                    that header or null), with ?path=P only those
#                    whose path starts with P
#   /fault/NAME/MODE set how /service/NAME answers: ok (200), hang (held
#                    for an hour), or a status (503 ...); 200 "fault NAME MODE"
#   /service/NAME    answers as /fault set it (ok at first)
#   /stats           {"requests":N,"inflight":N,"max_inflight":N}
#   /reset           forget the log and the statistics
use strict;
use warnings;
use FindBin;
use lib "$FindBin::RealBin/perl";
use Time::HiRes qw(time);
use MIME::Base64 qw(encode_base64);
use JSON::PP;
use Getopt::Long;
use MiniHttpd;

my ($port, $port_file, $parent) = (0, undef, undef);
GetOptions('port=i' => \$port, 'port-file=s' => \$port_file, 'parent=i' => \$parent)
  or die "usage: $0 [--port N] [--port-file FILE] [--parent PID]\n";

my $srv = MiniHttpd->new(parent => $parent);
$port = $srv->listen('http', $port);
if (defined $port_file)
{
	open(my $fh, '>', "$port_file.tmp") or die "$port_file: $!";
	print $fh "$port\n";
	close $fh;
	rename("$port_file.tmp", $port_file) or die "rename: $!";
}
print STDERR "http_server: listening on 127.0.0.1:$port\n";

my $json = JSON::PP->new->canonical(1)->utf8(0);
my @log;
my ($requests, $max_inflight) = (0, 0);
my %barrier;        # "N" => [connection, ...] held on /barrier/N
my %flaky;          # name => calls so far (/flaky)
my %fault;          # name => ok, hang or a status (/fault, /service)

# a held connection leaves the barriers when it closes
$srv->{on_close} = sub {
	my ($c) = @_;
	@{ $barrier{$_} } = grep { $_ != $c } @{ $barrier{$_} } for keys %barrier;
};

# The calls not answered yet, besides the one being handled.
sub inflight { return scalar($srv->held_connections); }

sub text { return [ [ 'Content-Type', 'text/plain' ] ]; }

sub bytes_0_255 { return join('', map { chr } 0 .. 255); }

sub handle
{
	my ($srv, $c, $name, $req) = @_;
	my ($method, $path, $query, $hdrs, $body) = @{$req}{qw(method path query_text headers body)};
	my %q = %{ $req->{query} };

	delete $c->{barrier};    # (a connection that waited on a barrier before)
	$requests++;
	$max_inflight = inflight() + 1 if inflight() + 1 > $max_inflight;
	push @log, { method => $method, path => $path, key => $hdrs->{'idempotency-key'},
		traceparent => $hdrs->{traceparent} }
	  unless $path =~ m{^/(log|stats|reset)$};

	if ($path eq '/echo')
	{
		my $text = $body;
		my $is_text = utf8::decode($text) && $text !~ /\0/;
		$srv->respond($c, 200, [ [ 'Content-Type', 'application/json' ] ],
			JSON::PP->new->canonical(1)->utf8(1)->encode({
				method => $method, path => $path, query => $query, headers => $hdrs,
				body => $is_text ? $text : undef,
				body_b64 => encode_base64($body, ''), body_len => length($body) }));
	}
	elsif ($path =~ m{^/status/(\d{3})$})
	{
		my @h = @{ text() };
		push @h, [ 'Location', '/echo' ] if $1 >= 300 && $1 < 400;
		$srv->respond($c, $1, \@h, "status $1");
	}
	elsif ($path =~ m{^/flaky/(\w+)/(\d+)/(\d{3})$})
	{
		# the first N calls of this name answer the status (with Retry-After
		# when ?retry_after=S is given), the next ones 200
		my ($name, $n, $status) = ($1, $2, $3);
		my $calls = ++$flaky{$name};
		my @h = @{ text() };
		if ($calls <= $n)
		{
			push @h, [ 'Retry-After', $q{retry_after} ] if defined $q{retry_after};
			$srv->respond($c, $status, \@h, "call $calls of $name fails");
		}
		else
		{
			$srv->respond($c, 200, \@h, "call $calls of $name");
		}
	}
	elsif ($path =~ m{^/fault/(\w+)/(ok|hang|\d{3})$})
	{
		$fault{$1} = $2;
		$srv->respond($c, 200, text(), "fault $1 $2");
	}
	elsif ($path =~ m{^/service/(\w+)$})
	{
		my ($name, $mode) = ($1, $fault{$1} // 'ok');
		if ($mode eq 'hang')
		{
			$srv->respond_at($c, time + 3600, 503, text(), "service $name hung");
		}
		elsif ($mode eq 'ok')
		{
			$srv->respond($c, 200, text(), "service $name");
		}
		else
		{
			$srv->respond($c, $mode, text(), "service $name fails");
		}
	}
	elsif ($path =~ m{^/delay/(\d+)$})
	{
		$srv->respond_at($c, time + $1 / 1000.0, 200, text(), "slept $1");
	}
	elsif ($path =~ m{^/bytes/(\d+)$})
	{
		$srv->respond($c, 200, text(), 'x' x $1);
	}
	elsif ($path eq '/binary')
	{
		$srv->respond($c, 200, [ [ 'Content-Type', 'application/octet-stream' ] ], bytes_0_255());
	}
	elsif ($path eq '/binary-undeclared')
	{
		$srv->respond($c, 200, [], bytes_0_255());
	}
	elsif ($path eq '/utf8-undeclared')
	{
		$srv->respond($c, 200, [], "h\xc3\xa9llo");
	}
	elsif ($path eq '/multi-header')
	{
		$srv->respond($c, 200, [ @{ text() }, [ 'X-Multi', 'a' ], [ 'X-Multi', 'b' ] ], 'multi');
	}
	elsif ($path =~ m{^/barrier/(\d+)$})
	{
		my $n = $1;
		$srv->respond_at($c, time + ($q{t} // 120000) / 1000.0,
			503, text(), "barrier $n not reached");
		$c->{barrier} = $n;
		# those still waiting (not timed out, not gone) and this one
		my @waiting = grep { ($_->{barrier} // -1) == $n && $_->{state} eq 'held' }
		  @{ $barrier{$n} // [] };
		$barrier{$n} = [ @waiting, $c ];
		if (@{ $barrier{$n} } >= $n)
		{
			$srv->respond($_, 200, text(), 'released') for @{ delete $barrier{$n} };
		}
	}
	elsif ($path eq '/log')
	{
		my $prefix = $q{path} // '';
		$srv->respond($c, 200, [ [ 'Content-Type', 'application/json' ] ],
			$json->encode([ grep { index($_->{path}, $prefix) == 0 } @log ]));
	}
	elsif ($path eq '/stats')
	{
		$srv->respond($c, 200, [ [ 'Content-Type', 'application/json' ] ],
			$json->encode({ requests => $requests, inflight => inflight(),
				max_inflight => $max_inflight, aborted => $srv->{aborted} }));
	}
	elsif ($path eq '/reset')
	{
		@log = ();
		($requests, $max_inflight) = (1, inflight() + 1);
		$srv->respond($c, 200, text(), 'reset');
	}
	else
	{
		$srv->respond($c, 404, text(), "no such path $path");
	}
}

$srv->run(\&handle);

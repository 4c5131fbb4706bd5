#!/usr/bin/perl
# A small HTTP/1.1 server for pg_durable's HTTP tests and benchmark: one
# process, non-blocking sockets and select(), so hundreds of slow requests
# can wait at once.  Perl core modules only.  It listens on 127.0.0.1 on a
# free port (or --port N), writes the port to --port-file and runs until
# killed (or until --parent PID is gone).
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
use IO::Socket::INET;
use IO::Select;
use Socket qw(SOL_SOCKET SO_REUSEADDR);
use Time::HiRes qw(time);
use MIME::Base64 qw(encode_base64);
use JSON::PP;
use Getopt::Long;
use POSIX qw(:errno_h);

my ($port, $port_file, $parent) = (0, undef, undef);
GetOptions('port=i' => \$port, 'port-file=s' => \$port_file, 'parent=i' => \$parent)
  or die "usage: $0 [--port N] [--port-file FILE] [--parent PID]\n";

$SIG{PIPE} = 'IGNORE';
my $listen = IO::Socket::INET->new(
	LocalAddr => '127.0.0.1',
	LocalPort => $port,
	Proto => 'tcp',
	Listen => 1024,
	ReuseAddr => 1,
	Blocking => 0) or die "listen: $!";
$port = $listen->sockport;
if (defined $port_file)
{
	open(my $fh, '>', "$port_file.tmp") or die "$port_file: $!";
	print $fh "$port\n";
	close $fh;
	rename("$port_file.tmp", $port_file) or die "rename: $!";
}
print STDERR "http_server: listening on 127.0.0.1:$port\n";

my $json = JSON::PP->new->canonical(1)->utf8(0);
my $sel = IO::Select->new($listen);
my %conns;          # fileno => state
my @log;
my ($requests, $inflight, $max_inflight) = (0, 0, 0);
my $aborted = 0;    # held calls whose client closed the connection first
my %barrier;        # "N" => [fileno, ...]
my %flaky;          # name => calls so far (/flaky)
my %fault;          # name => ok, hang or a status (/fault, /service)
my $last_parent_check = time;

sub respond
{
	my ($c, $status, $headers, $body) = @_;
	my %reason = (200 => 'OK', 201 => 'Created', 204 => 'No Content', 302 => 'Found',
		400 => 'Bad Request', 402 => 'Payment Required', 404 => 'Not Found',
		418 => "I'm a teapot", 429 => 'Too Many Requests',
		500 => 'Internal Server Error', 502 => 'Bad Gateway', 503 => 'Service Unavailable');
	my $out = "HTTP/1.1 $status " . ($reason{$status} // 'Status') . "\r\n";
	for my $h (@$headers) { $out .= "$h->[0]: $h->[1]\r\n"; }
	$out .= "Content-Length: " . length($body) . "\r\n";
	$out .= "Connection: close\r\n" if $c->{close};
	$out .= "\r\n" . $body;
	$c->{wbuf} .= $out;
	$c->{state} = 'write';
	$c->{held} = 0;
	$inflight--;
	$sel->add($c->{sock});
}

sub bytes_0_255 { return join('', map { chr } 0 .. 255); }

sub handle
{
	my ($c) = @_;
	my ($method, $target, $hdrs, $body) = @{ $c->{req} }{qw(method target headers body)};
	my ($path, $query) = split /\?/, $target, 2;
	$query //= '';
	my %q = map { my ($k, $v) = split /=/, $_, 2; ($k => $v // '') } grep { length } split /&/, $query;

	$requests++;
	$inflight++;
	$max_inflight = $inflight if $inflight > $max_inflight;
	push @log, { method => $method, path => $path, key => $hdrs->{'idempotency-key'},
		traceparent => $hdrs->{traceparent} }
	  unless $path =~ m{^/(log|stats|reset)$};

	if ($path eq '/echo')
	{
		my $text = $body;
		my $is_text = utf8::decode($text) && $text !~ /\0/;
		respond($c, 200, [ [ 'Content-Type', 'application/json' ] ],
			JSON::PP->new->canonical(1)->utf8(1)->encode({
				method => $method, path => $path, query => $query, headers => $hdrs,
				body => $is_text ? $text : undef,
				body_b64 => encode_base64($body, ''), body_len => length($body) }));
	}
	elsif ($path =~ m{^/status/(\d{3})$})
	{
		my @h = ([ 'Content-Type', 'text/plain' ]);
		push @h, [ 'Location', '/echo' ] if $1 >= 300 && $1 < 400;
		respond($c, $1, \@h, "status $1");
	}
	elsif ($path =~ m{^/flaky/(\w+)/(\d+)/(\d{3})$})
	{
		# the first N calls of this name answer the status (with Retry-After
		# when ?retry_after=S is given), the next ones 200
		my ($name, $n, $status) = ($1, $2, $3);
		my $calls = ++$flaky{$name};
		my @h = ([ 'Content-Type', 'text/plain' ]);
		if ($calls <= $n)
		{
			push @h, [ 'Retry-After', $q{retry_after} ] if defined $q{retry_after};
			respond($c, $status, \@h, "call $calls of $name fails");
		}
		else
		{
			respond($c, 200, \@h, "call $calls of $name");
		}
	}
	elsif ($path =~ m{^/fault/(\w+)/(ok|hang|\d{3})$})
	{
		$fault{$1} = $2;
		respond($c, 200, [ [ 'Content-Type', 'text/plain' ] ], "fault $1 $2");
	}
	elsif ($path =~ m{^/service/(\w+)$})
	{
		my ($name, $mode) = ($1, $fault{$1} // 'ok');
		if ($mode eq 'hang')
		{
			$c->{release_at} = time + 3600;
			$c->{release} = [ 503, [ [ 'Content-Type', 'text/plain' ] ], "service $name hung" ];
			$c->{held} = 1;
			$c->{state} = 'held';
		}
		elsif ($mode eq 'ok')
		{
			respond($c, 200, [ [ 'Content-Type', 'text/plain' ] ], "service $name");
		}
		else
		{
			respond($c, $mode, [ [ 'Content-Type', 'text/plain' ] ], "service $name fails");
		}
	}
	elsif ($path =~ m{^/delay/(\d+)$})
	{
		$c->{release_at} = time + $1 / 1000.0;
		$c->{release} = [ 200, [ [ 'Content-Type', 'text/plain' ] ], "slept $1" ];
		$c->{held} = 1;
		$c->{state} = 'held';
	}
	elsif ($path =~ m{^/bytes/(\d+)$})
	{
		respond($c, 200, [ [ 'Content-Type', 'text/plain' ] ], 'x' x $1);
	}
	elsif ($path eq '/binary')
	{
		respond($c, 200, [ [ 'Content-Type', 'application/octet-stream' ] ], bytes_0_255());
	}
	elsif ($path eq '/binary-undeclared')
	{
		respond($c, 200, [], bytes_0_255());
	}
	elsif ($path eq '/utf8-undeclared')
	{
		respond($c, 200, [], "h\xc3\xa9llo");
	}
	elsif ($path eq '/multi-header')
	{
		respond($c, 200, [ [ 'Content-Type', 'text/plain' ], [ 'X-Multi', 'a' ], [ 'X-Multi', 'b' ] ], 'multi');
	}
	elsif ($path =~ m{^/barrier/(\d+)$})
	{
		my $n = $1;
		$c->{release_at} = time + ($q{t} // 120000) / 1000.0;
		$c->{release} = [ 503, [ [ 'Content-Type', 'text/plain' ] ], "barrier $n not reached" ];
		$c->{held} = 1;
		$c->{state} = 'held';
		push @{ $barrier{$n} }, $c->{fd};
		if (@{ $barrier{$n} } >= $n)
		{
			for my $fd (@{ delete $barrier{$n} })
			{
				my $w = $conns{$fd} or next;
				respond($w, 200, [ [ 'Content-Type', 'text/plain' ] ], 'released');
			}
		}
	}
	elsif ($path eq '/log')
	{
		my $prefix = $q{path} // '';
		respond($c, 200, [ [ 'Content-Type', 'application/json' ] ],
			$json->encode([ grep { index($_->{path}, $prefix) == 0 } @log ]));
	}
	elsif ($path eq '/stats')
	{
		respond($c, 200, [ [ 'Content-Type', 'application/json' ] ],
			$json->encode({ requests => $requests, inflight => $inflight - 1,
				max_inflight => $max_inflight, aborted => $aborted }));
	}
	elsif ($path eq '/reset')
	{
		@log = ();
		($requests, $max_inflight) = (1, $inflight);
		respond($c, 200, [ [ 'Content-Type', 'text/plain' ] ], 'reset');
	}
	else
	{
		respond($c, 404, [ [ 'Content-Type', 'text/plain' ] ], "no such path $path");
	}
}

# Parse as many complete requests as the buffer holds (one at a time: a
# connection handles its next request after answering the current one).
sub try_parse
{
	my ($c) = @_;
	return unless $c->{state} eq 'read';
	my $end = index($c->{rbuf}, "\r\n\r\n");
	return if $end < 0;
	my $head = substr($c->{rbuf}, 0, $end);
	my @lines = split /\r\n/, $head;
	my $reqline = shift @lines;
	my ($method, $target) = split / /, $reqline;
	my %h;
	for (@lines)
	{
		my ($k, $v) = split /:\s*/, $_, 2;
		next unless defined $v;
		$k = lc $k;
		$h{$k} = exists $h{$k} ? "$h{$k}, $v" : $v;
	}
	my $len = $h{'content-length'} // 0;
	return if length($c->{rbuf}) < $end + 4 + $len;
	my $body = substr($c->{rbuf}, $end + 4, $len);
	substr($c->{rbuf}, 0, $end + 4 + $len) = '';
	$c->{close} = (lc($h{connection} // '') eq 'close');
	$c->{req} = { method => $method, target => $target, headers => \%h, body => $body };
	$c->{state} = 'busy';
	handle($c);
}

sub close_conn
{
	my ($c) = @_;
	$sel->remove($c->{sock});
	if ($c->{held})
	{
		$inflight--;
		$aborted++;    # the client gave up on a held (slow) call
		for my $n (keys %barrier)
		{
			@{ $barrier{$n} } = grep { $_ != $c->{fd} } @{ $barrier{$n} };
		}
	}
	delete $conns{ $c->{fd} };
	close $c->{sock};
}

while (1)
{
	my $now = time;
	my $timeout = 1.0;
	for my $c (values %conns)
	{
		next unless $c->{held};
		if ($c->{release_at} <= $now)
		{
			respond($c, @{ $c->{release} });
			if (my ($n) = grep { grep { $_ == $c->{fd} } @{ $barrier{$_} } } keys %barrier)
			{
				@{ $barrier{$n} } = grep { $_ != $c->{fd} } @{ $barrier{$n} };
			}
		}
		else
		{
			my $d = $c->{release_at} - $now;
			$timeout = $d if $d < $timeout;
		}
	}
	if (defined $parent && time - $last_parent_check > 1)
	{
		exit 0 unless kill 0, $parent;
		$last_parent_check = time;
	}

	my @wr = grep { $conns{ $_->fileno } && $conns{ $_->fileno }{state} eq 'write' } $sel->handles;
	my ($r, $w) = IO::Select->select($sel, IO::Select->new(@wr), undef, $timeout);
	for my $s (@{ $r // [] })
	{
		if ($s == $listen)
		{
			while (my $new = $listen->accept)
			{
				$new->blocking(0);
				my $fd = $new->fileno;
				$conns{$fd} = { sock => $new, fd => $fd, rbuf => '', wbuf => '', state => 'read' };
				$sel->add($new);
			}
			next;
		}
		my $c = $conns{ $s->fileno } or next;
		my $n = sysread($s, my $buf, 65536);
		if (!defined $n)
		{
			next if $! == EAGAIN || $! == EWOULDBLOCK;
			close_conn($c);
			next;
		}
		if ($n == 0)
		{
			close_conn($c);
			next;
		}
		$c->{rbuf} .= $buf;
		try_parse($c);
	}
	for my $s (@{ $w // [] })
	{
		my $c = $conns{ $s->fileno } or next;
		next unless length $c->{wbuf};
		my $n = syswrite($s, $c->{wbuf});
		if (!defined $n)
		{
			next if $! == EAGAIN || $! == EWOULDBLOCK;
			close_conn($c);
			next;
		}
		substr($c->{wbuf}, 0, $n) = '';
		if (!length $c->{wbuf})
		{
			if ($c->{close}) { close_conn($c); next; }
			$c->{state} = 'read';
			try_parse($c);
		}
	}
}

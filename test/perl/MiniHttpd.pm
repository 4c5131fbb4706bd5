# A small HTTP/1.1 server loop for the test and example servers: one
# process, non-blocking sockets and select(), any number of listening
# ports, answers that may be given later (a slow service) or never (a hung
# one).  Perl core modules only; loopback only.
#
#   my $srv = MiniHttpd->new(parent => $pid);     # exit when $pid is gone
#   my $port = $srv->listen('order', 0);          # 0: a free port
#   $srv->run(sub {
#       my ($srv, $c, $name, $req) = @_;          # $req: method, path, query
#       ...                                       # (hash), headers (lower-case
#       $srv->respond($c, 200, [[...]], $body);   # names), body
#       # or $srv->respond_at($c, $when, 200, [...], $body)
#       # or $srv->hold($c)  (never answered unless respond is called later)
#   });
#
# $srv->{aborted} counts the held calls whose client closed first;
# $srv->{on_close}, when set, is called with each connection that closes.
# A body comes with Content-Length or chunked (Transfer-Encoding).
package MiniHttpd;

use strict;
use warnings;
use IO::Socket::INET;
use IO::Select;
use Time::HiRes qw(time);
use POSIX qw(:errno_h);

my %REASON = (200 => 'OK', 201 => 'Created', 204 => 'No Content', 302 => 'Found',
	400 => 'Bad Request', 402 => 'Payment Required', 404 => 'Not Found',
	409 => 'Conflict', 418 => "I'm a teapot", 422 => 'Unprocessable Content',
	429 => 'Too Many Requests', 500 => 'Internal Server Error', 502 => 'Bad Gateway',
	503 => 'Service Unavailable');

sub new
{
	my ($class, %opt) = @_;
	$SIG{PIPE} = 'IGNORE';
	return bless { parent => $opt{parent}, sel => IO::Select->new, listeners => {},
		conns => {}, aborted => 0, last_parent_check => time }, $class;
}

# Listen on 127.0.0.1:$port (0: a free one) under $name; returns the port.
sub listen
{
	my ($self, $name, $port) = @_;
	my $l = IO::Socket::INET->new(LocalAddr => '127.0.0.1', LocalPort => $port // 0,
		Proto => 'tcp', Listen => 1024, ReuseAddr => 1, Blocking => 0)
	  or die "listen ($name): $!";
	$self->{listeners}{ $l->fileno } = { sock => $l, name => $name };
	$self->{sel}->add($l);
	return $l->sockport;
}

sub respond
{
	my ($self, $c, $status, $headers, $body) = @_;
	return unless $self->{conns}{ $c->{fd} } && $c->{state} ne 'write';
	my $out = "HTTP/1.1 $status " . ($REASON{$status} // 'Status') . "\r\n";
	for my $h (@$headers) { $out .= "$h->[0]: $h->[1]\r\n"; }
	$out .= "Content-Length: " . length($body) . "\r\n";
	$out .= "Connection: close\r\n" if $c->{close};
	$out .= "\r\n" . $body;
	$c->{wbuf} .= $out;
	$c->{state} = 'write';
	delete $c->{release_at};
	delete $c->{release};
}

# Answer at $when (an epoch time in seconds, fractions allowed).
sub respond_at
{
	my ($self, $c, $when, @answer) = @_;
	$c->{state} = 'held';
	$c->{release_at} = $when;
	$c->{release} = \@answer;
}

# Keep the call open without an answer until respond is called for it.
sub hold
{
	my ($self, $c) = @_;
	$c->{state} = 'held';
}

sub held_connections
{
	my ($self) = @_;
	return grep { $_->{state} eq 'held' } values %{ $self->{conns} };
}

sub parse_request
{
	my ($self, $c, $handler) = @_;
	return unless $c->{state} eq 'read';
	my $end = index($c->{rbuf}, "\r\n\r\n");
	return if $end < 0;
	my @lines = split /\r\n/, substr($c->{rbuf}, 0, $end);
	my ($method, $target) = split / /, shift(@lines) // '';
	my %h;
	for (@lines)
	{
		my ($k, $v) = split /:\s*/, $_, 2;
		next unless defined $v;
		$k = lc $k;
		$h{$k} = exists $h{$k} ? "$h{$k}, $v" : $v;
	}
	my $body;
	# a client that waits for a go-ahead before its body (curl, over 1 MB) gets it
	if (lc($h{expect} // '') eq '100-continue' && !$c->{continued})
	{
		$c->{continued} = 1;
		syswrite($c->{sock}, "HTTP/1.1 100 Continue\r\n\r\n");
	}
	if (($h{'transfer-encoding'} // '') =~ /chunked/i)
	{
		# (the OpenTelemetry JavaScript exporter sends its body in chunks)
		my $pos = $end + 4;
		$body = '';
		while (1)
		{
			my $eol = index($c->{rbuf}, "\r\n", $pos);
			return if $eol < 0;
			my $size = hex(substr($c->{rbuf}, $pos, $eol - $pos) =~ s/;.*//sr);
			if ($size == 0)
			{
				# the trailer, up to an empty line
				my $last = index($c->{rbuf}, "\r\n\r\n", $eol);
				return if $last < 0;
				$pos = $last + 4;
				last;
			}
			return if length($c->{rbuf}) < $eol + 2 + $size + 2;
			$body .= substr($c->{rbuf}, $eol + 2, $size);
			$pos = $eol + 2 + $size + 2;
		}
		substr($c->{rbuf}, 0, $pos) = '';
	}
	else
	{
		my $len = $h{'content-length'} // 0;
		return if length($c->{rbuf}) < $end + 4 + $len;
		$body = substr($c->{rbuf}, $end + 4, $len);
		substr($c->{rbuf}, 0, $end + 4 + $len) = '';
	}
	delete $c->{continued};
	my ($path, $query) = split /\?/, $target // '/', 2;
	my %q = map { my ($k, $v) = split /=/, $_, 2; ($k => $v // '') }
	  grep { length } split /&/, $query // '';
	$c->{close} = (lc($h{connection} // '') eq 'close');
	$c->{state} = 'busy';
	$handler->($self, $c, $c->{name},
		{ method => $method // '', path => $path, query => \%q, query_text => $query // '',
		  headers => \%h, body => $body });
}

sub close_conn
{
	my ($self, $c) = @_;
	$self->{aborted}++ if $c->{state} eq 'held';
	$self->{sel}->remove($c->{sock});
	delete $self->{conns}{ $c->{fd} };
	close $c->{sock};
	$self->{on_close}->($c) if $self->{on_close};
}

sub run
{
	my ($self, $handler) = @_;
	my $conns = $self->{conns};
	while (1)
	{
		my $now = time;
		my $timeout = 1.0;
		for my $c (values %$conns)
		{
			next unless defined $c->{release_at};
			if ($c->{release_at} <= $now) { $self->respond($c, @{ $c->{release} }); }
			else
			{
				my $d = $c->{release_at} - $now;
				$timeout = $d if $d < $timeout;
			}
		}
		if (defined $self->{parent} && $now - $self->{last_parent_check} > 1)
		{
			exit 0 unless kill 0, $self->{parent};
			$self->{last_parent_check} = $now;
		}
		my @wr = map { $_->{sock} } grep { $_->{state} eq 'write' } values %$conns;
		my ($r, $w) = IO::Select->select($self->{sel}, IO::Select->new(@wr), undef, $timeout);
		for my $s (@{ $r // [] })
		{
			if (my $l = $self->{listeners}{ $s->fileno })
			{
				while (my $new = $l->{sock}->accept)
				{
					$new->blocking(0);
					$conns->{ $new->fileno } = { sock => $new, fd => $new->fileno,
						name => $l->{name}, rbuf => '', wbuf => '', state => 'read' };
					$self->{sel}->add($new);
				}
				next;
			}
			my $c = $conns->{ $s->fileno } or next;
			my $n = sysread($s, my $buf, 65536);
			if (!defined $n)
			{
				next if $! == EAGAIN || $! == EWOULDBLOCK;
				$self->close_conn($c);
				next;
			}
			if ($n == 0) { $self->close_conn($c); next; }
			$c->{rbuf} .= $buf;
			$self->parse_request($c, $handler);
		}
		for my $s (@{ $w // [] })
		{
			my $c = $conns->{ $s->fileno } or next;
			my $n = syswrite($s, $c->{wbuf});
			if (!defined $n)
			{
				next if $! == EAGAIN || $! == EWOULDBLOCK;
				$self->close_conn($c);
				next;
			}
			substr($c->{wbuf}, 0, $n) = '';
			next if length $c->{wbuf};
			if ($c->{close}) { $self->close_conn($c); next; }
			$c->{state} = 'read';
			$self->parse_request($c, $handler);
		}
	}
}

1;

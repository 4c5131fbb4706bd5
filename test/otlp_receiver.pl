#!/usr/bin/perl
# A test OpenTelemetry collector for pg_durable's tracing tests:
# it takes OTLP/HTTP JSON posts and records the spans.  Perl core modules
# only, on the socket loop of test/perl/MiniHttpd.pm.
# Listens on 127.0.0.1, on --port N or a free port written to --port-file;
# runs until killed or until --parent PID is gone.  Every accepted span is
# also appended as one JSON line to --out FILE, so that a test can restart
# the receiver and keep what it had.  With --discard (the benchmark) posts
# are answered without being parsed: only /posts counts them and their bytes.
#
#   POST /v1/traces    200 {} and the spans recorded; 503 instead while
#                      /fail/N has failures left
#   GET  /spans        200 [ {trace_id, span_id, parent_span_id, name, kind,
#                      status, status_message, service, attributes:{k: v},
#                      start, end} ... ] (every span posted, in order; the
#                      same span posted twice is there twice)
#   GET  /posts        200 {"posts": N, "failed": N, "headers": {...}}
#                      (headers: the lower-case headers of the last post)
#   GET  /fail/N       answer 503 to the next N posts
use strict;
use warnings;
use FindBin;
use lib "$FindBin::RealBin/perl";
use JSON::PP;
use Getopt::Long;
use MiniHttpd;

my ($port, $port_file, $parent, $out, $discard) = (0, undef, undef, undef, 0);
GetOptions('port=i' => \$port, 'port-file=s' => \$port_file, 'parent=i' => \$parent,
	'out=s' => \$out, 'discard' => \$discard)
  or die "usage: $0 [--port N] [--port-file FILE] [--parent PID] [--out FILE] [--discard]\n";

my $srv = MiniHttpd->new(parent => $parent);
$port = $srv->listen('otlp', $port);
if (defined $port_file)
{
	open(my $fh, '>', "$port_file.tmp") or die "$port_file: $!";
	print $fh "$port\n";
	close $fh;
	rename("$port_file.tmp", $port_file) or die "rename: $!";
}
print STDERR "otlp_receiver: listening on 127.0.0.1:$port\n";

my $json = JSON::PP->new->canonical(1);
my @spans;
my ($posts, $failed, $fail_next, $bytes) = (0, 0, 0, 0);
my $last_headers = {};

# what an earlier run of the receiver recorded
if (defined $out && open(my $fh, '<', $out))
{
	while (my $line = <$fh>)
	{
		chomp $line;
		push @spans, $json->decode($line) if $line ne '';
	}
	close $fh;
}

sub value_of
{
	my ($v) = @_;
	return $v->{stringValue} if exists $v->{stringValue};
	return 0 + $v->{intValue} if exists $v->{intValue};
	return $v->{boolValue} ? JSON::PP::true : JSON::PP::false if exists $v->{boolValue};
	return $v->{doubleValue} if exists $v->{doubleValue};
	return undef;
}

sub record
{
	my ($body) = @_;
	my $doc = $json->decode($body);
	my @new;
	for my $rs (@{ $doc->{resourceSpans} // [] })
	{
		my %res = map { $_->{key} => value_of($_->{value}) } @{ $rs->{resource}{attributes} // [] };
		for my $ss (@{ $rs->{scopeSpans} // [] })
		{
			for my $s (@{ $ss->{spans} // [] })
			{
				push @new, {
					trace_id => $s->{traceId},
					span_id => $s->{spanId},
					parent_span_id => $s->{parentSpanId} // '',
					name => $s->{name},
					kind => $s->{kind},
					status => $s->{status}{code} // 0,
					status_message => $s->{status}{message},
					service => $res{'service.name'},
					start => $s->{startTimeUnixNano},
					end => $s->{endTimeUnixNano},
					attributes => { map { $_->{key} => value_of($_->{value}) } @{ $s->{attributes} // [] } },
				};
			}
		}
	}
	push @spans, @new;
	if (defined $out)
	{
		open(my $fh, '>>', $out) or die "$out: $!";
		print $fh $json->encode($_), "\n" for @new;
		close $fh;
	}
}

sub answer
{
	my ($c, $status, $body) = @_;
	$srv->respond($c, $status, [ [ 'Content-Type', 'application/json' ] ], $body);
}

sub handle
{
	my ($srv, $c, $name, $req) = @_;
	my ($method, $path, $body) = @{$req}{qw(method path body)};

	if ($method eq 'POST' && $path eq '/v1/traces')
	{
		$posts++;
		$bytes += length($body);
		$last_headers = $req->{headers};
		if ($discard)
		{
			answer($c, 200, '{}');
		}
		elsif ($fail_next > 0)
		{
			$fail_next--;
			$failed++;
			answer($c, 503, '{"error":"try later"}');
		}
		elsif (eval { record($body); 1 })
		{
			answer($c, 200, '{}');
		}
		else
		{
			answer($c, 400, $json->encode({ error => "$@" }));
		}
	}
	elsif ($path eq '/spans')
	{
		answer($c, 200, $json->encode(\@spans));
	}
	elsif ($path eq '/posts')
	{
		answer($c, 200, $json->encode({ posts => $posts, failed => $failed, bytes => $bytes, headers => $last_headers }));
	}
	elsif ($path =~ m{^/fail/(\d+)$})
	{
		$fail_next = $1;
		answer($c, 200, '{}');
	}
	else
	{
		answer($c, 404, '{"error":"no such path"}');
	}
}

$srv->run(\&handle);

#!/usr/bin/perl
# Talk to the example's services and span receiver.  Perl core
# modules only.
#
#   ctl.pl PORTS_FILE fault SERVICE '{"mode": "down"}'   set a fault switch
#   ctl.pl PORTS_FILE ledger SERVICE                      its ledger totals
#   ctl.pl PORTS_FILE stats SERVICE                       its request count
#   ctl.pl PORTS_FILE log SERVICE                         its request log
#   ctl.pl - spans RECEIVER_URL TRACE_ID                  one trace as a tree
use strict;
use warnings;
use HTTP::Tiny;
use JSON::PP;

my ($ports_file, $cmd, @args) = @ARGV;
die "usage: $0 PORTS_FILE fault|ledger|stats|log SERVICE [JSON] | - spans URL TRACE_ID\n"
  unless defined $cmd;
my $json = JSON::PP->new->canonical(1)->utf8(1);
my $http = HTTP::Tiny->new(timeout => 10);

sub get_json
{
	my ($url, $method, $body) = @_;
	my $r = $http->request($method // 'GET', $url,
		defined $body ? { content => $body, headers => { 'Content-Type' => 'application/json' } } : {});
	die "$url: $r->{status} $r->{reason}\n" unless $r->{success};
	return $json->decode($r->{content});
}

sub service_url
{
	my ($service) = @_;
	open(my $fh, '<', $ports_file) or die "$ports_file: $!\n";
	my $ports = $json->decode(join('', <$fh>));
	die "no service $service\n" unless $ports->{$service};
	return "http://127.0.0.1:$ports->{$service}";
}

if ($cmd eq 'fault')
{
	my ($service, $fault) = @args;
	get_json(service_url($service) . '/_fault', 'POST', $fault);
}
elsif ($cmd eq 'ledger')
{
	my $l = get_json(service_url($args[0]) . '/_ledger');
	my $t = $l->{totals};
	print join(' ', map { "$_=$t->{$_}{n}" } sort keys %$t) || '(nothing)', "\n";
}
elsif ($cmd eq 'stats')
{
	print get_json(service_url($args[0]) . '/_stats')->{requests}, "\n";
}
elsif ($cmd eq 'log')
{
	print $json->encode(get_json(service_url($args[0]) . '/_log')), "\n";
}
elsif ($cmd eq 'spans')
{
	my ($url, $trace) = @args;
	my @spans = grep { $_->{trace_id} eq $trace } @{ get_json("$url/spans") };
	my (%seen, %children, @roots);
	for my $s (@spans)
	{
		next if $seen{ $s->{span_id} }++;    # at least once: a span may come twice
		push @{ $children{ $s->{parent_span_id} // '' } }, $s;
	}
	my %ids = map { $_->{span_id} => 1 } @spans;
	@roots = grep { !$ids{ $_->{parent_span_id} // '' } } map { @$_ } values %children;
	my %KIND = (1 => 'INTERNAL', 2 => 'SERVER', 3 => 'CLIENT', 4 => 'PRODUCER', 5 => 'CONSUMER');
	my %STATUS = (0 => 'unset', 1 => 'ok', 2 => 'error');
	my $show;
	$show = sub {
		my ($s, $depth) = @_;
		printf "%s%s %s [%s, %s]%s\n", '  ' x $depth, $KIND{ $s->{kind} // '' } // $s->{kind} // '?',
		  $s->{name}, $s->{service} // '?', $STATUS{ $s->{status} // '' } // $s->{status} // '',
		  $s->{status_message} ? " $s->{status_message}" : '';
		$show->($_, $depth + 1)
		  for sort { ($a->{start} // 0) <=> ($b->{start} // 0) } @{ $children{ $s->{span_id} } // [] };
	};
	print "trace $trace: ", scalar(keys %seen), " spans\n";
	$show->($_, 1) for sort { ($a->{start} // 0) <=> ($b->{start} // 0) } @roots;
}
else
{
	die "unknown command $cmd\n";
}

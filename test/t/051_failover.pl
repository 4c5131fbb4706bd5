# Failover to a streaming standby (docs/operations/high-availability.md),
# in two rounds: a synchronous standby (synchronous_commit = remote_apply),
# then an asynchronous one.  Each round starts 200 instances of mixed shapes
# (chains of 12 ledger inserts, 50-branch fan-outs, loops with sleeps,
# signal waits, a keyed lock's queue, a limit's queue, HTTP steps against
# the local test server), kills the primary's postmaster (SIGKILL) mid-run,
# promotes the standby and sends the signals there.  Then:
#  - every instance ends, completed;
#  - every SQL step's effect is in the ledger exactly once for the history
#    that survived (an instance's expected effects are written in the
#    transaction that starts it, so they survive or are lost with it);
#  - an HTTP call made again carries the same Idempotency-Key;
#  - df.check() is empty; no lock or limit slot is held;
#  - synchronous: every instance whose start was acknowledged exists.
# The times from the kill to the new primary's first step are reported.
use strict;
use warnings;
use FindBin;
use lib "$FindBin::RealBin/../perl";
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use IPC::Run;
use Time::HiRes qw(time usleep);
use PgDurableTest;
use List::Util qw(shuffle);
use HTTP::Tiny;

my $base = start_http_server();

sub sql_literal { (my $s = $_[0]) =~ s/'/''/g; return "'$s'"; }

# A SQL step that records $step in the ledger (a literal of the DSL).
sub effect
{
	my ($step, $sleep) = @_;
	return "'" . step_sql($step, $sleep // 0.02) . "'";
}

# The 200 workflows of a round: [graph, [expected effects]].
sub shapes
{
	my @w;
	for my $i (1 .. 120)
	{
		my @s = map { "c$_" } 1 .. 12;
		push @w, [ join(' ~> ', map { effect($_) } @s), \@s ];
	}
	for my $i (1 .. 4)
	{
		my @s = map { "f$_" } 1 .. 50;
		push @w, [ '(' . join(' & ', map { effect($_) } @s) . ") ~> " . effect('f_end'),
			[ @s, 'f_end' ] ];
	}
	my $iid = q{''{sys_instance_id}''};
	for my $i (1 .. 10)
	{
		# each iteration records its number from the instance's counter
		push @w, [
			"('INSERT INTO counters VALUES ($iid, 0)' ~> "
			  . "df.loop(('WITH c AS (UPDATE counters SET n = n + 1 WHERE id = $iid RETURNING n) "
			  . "INSERT INTO effects (instance_id, step) SELECT $iid, ''l'' || n FROM c') ~> df.sleep(0.3), "
			  . "'SELECT n < 3 FROM counters WHERE id = $iid'))",
			[qw(l1 l2 l3)] ];
	}
	push @w, [ "df.wait_for_signal('go') ~> " . effect('w1'), ['w1'] ] for 1 .. 20;
	push @w, [ "df.with_lock(" . effect('k1', 0.1) . ", ARRAY['acct'])", ['k1'] ] for 1 .. 16;
	push @w, [ "df.limit(" . effect('m1', 0.2) . ", 'lim', 2)", ['m1'] ] for 1 .. 16;
	push @w, [ "df.http('$base/delay/3000', 'GET', NULL, NULL, 30) ~> " . effect('h1'), ['h1'] ]
	  for 1 .. 14;
	# in a fixed mixed order, so that every shape is under way at the kill
	srand(49);
	return shuffle(@w);
}

sub round
{
	my ($sync) = @_;
	my $what = $sync ? 'synchronous' : 'asynchronous';
	my ($primary, $standby) = engine_pair($sync ? 'sync' : 'async', 4,
		"pg_durable.http_allow_private = on\n", $sync);
	$primary->safe_psql('postgres', qq{
SELECT df.grant_usage('df_user', include_http => true);
GRANT INSERT ON expected TO df_user;
CREATE TABLE counters (id text PRIMARY KEY, n int NOT NULL);
GRANT INSERT, SELECT, UPDATE ON counters TO df_user;
});
	$primary->wait_for_catchup($standby);
	HTTP::Tiny->new->get("$base/reset");

	# one psql starts them all, each in its own transaction with its
	# expected effects, printing each id the server acknowledged
	my $script = "SET ROLE df_user;\n";
	for my $w (shapes())
	{
		my ($graph, $steps) = @$w;
		$script .=
		    "WITH s AS (SELECT df.start($graph) AS id), "
		  . "e AS (INSERT INTO expected SELECT s.id, x FROM s, unnest(ARRAY["
		  . join(', ', map { "'$_'" } @$steps)
		  . "]) x) SELECT 'started ' || id FROM s;\n"
		  # spread over the first seconds of the run, so the kill falls among them
		  . "SELECT pg_sleep(0.02);\n";
	}
	my $file = "$PostgreSQL::Test::Utils::tmp_check/starts_$what.sql";
	open(my $fh, '>', $file) or die "$file: $!";
	print $fh $script;
	close $fh;
	my ($out, $err) = ('', '');
	my $h = IPC::Run::start([ 'psql', '-XAtq', '-d', $primary->connstr('postgres'), '-f', $file ],
		'<', \undef, '>', \$out, '2>', \$err);

	# mid-run: the starts still under way, a tenth of the steps done
	ok(query_until($primary, 'SELECT count(*) >= 150 FROM df.instances'),
		"$what: the workload is under way");
	my ($pid) = slurp_file($primary->data_dir . '/postmaster.pid') =~ /^(\d+)/
	  or die 'no postmaster pid';
	my $t_kill = time();
	ok(kill('KILL', $pid), "$what: SIGKILL the primary's postmaster $pid");
	$h->finish;    # psql ends on the lost connection
	$primary->{_pid} = undef;
	my %acked = map { $_ => 1 } $out =~ /^started ([0-9a-f]{8})$/mg;
	note "$what: " . scalar(keys %acked) . " starts acknowledged before the kill";

	my $last = $standby->safe_psql('postgres', 'SELECT coalesce(max(id), 0) FROM df_internal.events');
	$standby->promote;
	my $t_promoted = time();
	ok( query_until($standby,
			"SELECT EXISTS (SELECT FROM df_internal.events WHERE id > $last AND kind = 'node_completed')"),
		"$what: the new primary runs steps");
	my $t_first = $standby->safe_psql('postgres',
		"SELECT extract(epoch FROM min(at)) FROM df_internal.events WHERE id > $last AND kind = 'node_completed'");
	note sprintf('%s: promoted %.2f s after the kill, the first step completed %.2f s after the kill',
		$what, $t_promoted - $t_kill, $t_first - $t_kill);

	# the lost primary may have made some effects that did not survive: the
	# ledger on the new primary is the surviving history
	$standby->safe_psql('postgres', q{
SET ROLE df_user;
SELECT df.signal(n.instance_id, 'go', '{}') FROM df.nodes n WHERE n.node_type = 'SIGNAL'});
	wait_instances_done($standby, $what);
	my $n = $standby->safe_psql('postgres', 'SELECT count(*) FROM df.instances');
	check_effects($standby, $n);
	note "$what: $n of 200 instances survived and completed";
	if ($sync)
	{
		is( $standby->safe_psql('postgres',
				'SELECT count(*) FROM df.instances WHERE id IN ('
				  . join(', ', map { "'$_'" } sort keys %acked) . ')'),
			scalar(keys %acked),
			"$what: every acknowledged start exists on the new primary");
	}
	else
	{
		cmp_ok($n, '>=', 0, "$what: " . (scalar(keys %acked) - $n) . ' acknowledged starts lost at most');
	}
	is( $standby->safe_psql('postgres',
			"SELECT count(*) FROM effects e WHERE NOT EXISTS "
			  . "(SELECT FROM df.instances i WHERE i.id = e.instance_id)"),
		'0', "$what: no effect of an instance that does not exist");
	is( $standby->safe_psql('postgres', q{
SELECT (SELECT count(*) FROM df_internal.locks) + (SELECT count(*) FROM df_internal.limit_holders)
     + (SELECT count(*) FROM df_internal.limit_waiters)}),
		'0', "$what: no lock or limit slot is held");
	check_df_clean($standby, "the $what failover");

	# HTTP: every call of one node carried one key, that node's
	my $log = http_get($base, '/log?path=/delay/3000');
	my %keys;
	$keys{ ($_->{key} // 'none') =~ s/:.*//r }{ $_->{key} // 'none' } = 1 for @$log;
	is(scalar(grep { keys %{ $keys{$_} } != 1 } keys %keys),
		0, "$what: an HTTP call made again carried the same Idempotency-Key");
	note "$what: " . scalar(@$log) . ' HTTP requests for ' . scalar(keys %keys) . ' calls';
	$standby->stop('fast');
	return;
}

round(1);
round(0);
done_testing();

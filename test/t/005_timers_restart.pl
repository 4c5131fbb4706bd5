# Durable timers, buffered signals and loops across server restarts: stop
# the server (once in fast mode, once in immediate mode) while
#  A. a df.sleep(3) between two steps is pending,
#  B. a signal has been sent to an instance whose wait is registered only
#     after the restart (it sleeps first),
#  C. a root loop with a df.sleep in its body is mid-way (it counts to 5 in
#     a table and breaks),
#  D. a non-root loop with a df.sleep in its body is mid-way (it counts to
#     5 in a named result carried across iterations),
# then start it again and check that each instance completes once, the
# sleep lasted at least its 3 seconds and fired after the restart, the
# signal reached the wait, the loops counted 1..5 with no iteration lost or
# repeated, and every step's effect exists exactly once.
use strict;
use warnings;
use FindBin;
use lib "$FindBin::RealBin/../perl";
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use PgDurableTest;

my $workers = 2;
my $node = engine_node('timers_restart', $workers);

$node->safe_psql('postgres', qq{
CREATE TABLE ticks (instance_id text NOT NULL, n int NOT NULL,
                    at timestamptz NOT NULL DEFAULT clock_timestamp());
GRANT INSERT, SELECT ON ticks TO $PgDurableTest::ROLE;
});

my $iid = q{''{sys_instance_id}''};
my %graph = (
	sleep => qq{'INSERT INTO effects (instance_id, step) VALUES ($iid, ''a'')'
		~> df.sleep(3)
		~> 'INSERT INTO effects (instance_id, step) VALUES ($iid, ''b'')'},
	signal => qq{df.sleep(5)
		~> (df.wait_for_signal('go') |=> 'sig')
		~> 'INSERT INTO effects (instance_id, step) SELECT $iid, ''sig:'' || \$sig.data'},
	root_loop => qq{@> ('INSERT INTO ticks (instance_id, n)
				SELECT $iid, count(*) + 1 FROM ticks WHERE instance_id = $iid'
			~> df.sleep(1)
			~> ('SELECT count(*) >= 5 FROM ticks WHERE instance_id = $iid'
				?> df.break('done') !> 'SELECT 1'))},
	loop => qq{('SELECT 0 AS n' |=> 'cnt')
		~> df.loop((('SELECT \$cnt + 1 AS n' |=> 'cnt')
				~> 'INSERT INTO ticks (instance_id, n) SELECT $iid, \$cnt'
				~> df.sleep(1)),
			'SELECT \$cnt < 5')
		~> 'INSERT INTO effects (instance_id, step) SELECT $iid, ''final:'' || \$cnt'},
);

# Start a workflow as the workflow role; record the effects it must have.
sub start
{
	my ($g, @steps) = @_;
	my $id = $node->safe_psql('postgres',
		"SET ROLE $PgDurableTest::ROLE; SELECT df.start($g);");
	die "df.start returned '$id'" unless $id =~ /^[0-9a-f]{8}$/;
	$node->safe_psql('postgres',
		"INSERT INTO expected VALUES "
		  . join(', ', map { "('$id', '$_')" } @steps))
	  if @steps;
	return $id;
}

my $ninstances = 0;
for my $mode ('fast', 'immediate')
{
	# the loops first: they are mid-way (two iterations done) when the
	# others have just started
	my $root_loop = start($graph{root_loop});
	my $loop = start($graph{loop}, 'final:5');
	$node->poll_query_until('postgres',
		"SELECT count(*) >= 2 FROM ticks WHERE instance_id = '$root_loop'")
	  or die "the root loop did not iterate";
	$node->poll_query_until('postgres',
		"SELECT count(*) >= 2 FROM ticks WHERE instance_id = '$loop'")
	  or die "the non-root loop did not iterate";

	my $sleep = start($graph{sleep}, 'a', 'b');
	my $signal = start($graph{signal}, 'sig:hello');
	$ninstances += 4;
	for my $id ($sleep, $signal)
	{
		$node->poll_query_until('postgres',
			"SELECT EXISTS (SELECT 1 FROM df_internal.tasks WHERE instance_id = '$id' AND kind = 'timer')")
		  or die "the sleep of $id never got its timer";
	}
	$node->safe_psql('postgres',
		"SET ROLE $PgDurableTest::ROLE; SELECT df.signal('$signal', 'go', 'hello');");
	is( $node->safe_psql('postgres',
			"SELECT count(*) FROM df_internal.waits WHERE instance_id = '$signal'"),
		'0', "$mode: the signal was sent before its wait was registered");
	my $ticks_before = $node->safe_psql('postgres',
		"SELECT count(*) FROM ticks WHERE instance_id IN ('$root_loop', '$loop')");

	$node->stop($mode);
	$node->start;
	wait_engine_ready($node, $workers);
	pass("$mode: server stopped mid-sleep and mid-loop, and restarted");

	my $ok = wait_instances_done($node, $mode);
	$ok = check_effects($node, $ninstances) && $ok;

	# A: the sleep lasted its 3 seconds and fell due after the restart
	is( $node->safe_psql('postgres', qq{
SELECT (SELECT at FROM effects WHERE instance_id = '$sleep' AND step = 'b')
     - (SELECT at FROM effects WHERE instance_id = '$sleep' AND step = 'a') >= interval '3 seconds',
       n.status, n.result, n.updated_at > pg_postmaster_start_time()
FROM df.nodes n WHERE n.instance_id = '$sleep' AND n.node_type = 'SLEEP'}),
		't|completed|{"slept": true, "seconds": 3}|t',
		"$mode: the sleep lasted at least 3 seconds and completed once, after the restart");

	# B: the wait was registered after the restart and got the signal
	is( $node->safe_psql('postgres', qq{
SELECT n.status, n.updated_at > pg_postmaster_start_time(), n.result->>'data', n.result->>'timed_out'
FROM df.nodes n WHERE n.instance_id = '$signal' AND n.node_type = 'SIGNAL'}),
		'completed|t|hello|false',
		"$mode: a signal sent before the restart reached a wait registered after it");

	# C, D: each loop counted 1..5 once, across the restart
	for my $l ([ 'root loop', $root_loop ], [ 'non-root loop', $loop ])
	{
		is( $node->safe_psql('postgres',
				"SELECT string_agg(n::text, ',' ORDER BY n, at) FROM ticks WHERE instance_id = '$l->[1]'"),
			'1,2,3,4,5',
			"$mode: the $l->[0] iterated 1..5 exactly once each");
	}
	is( $node->safe_psql('postgres', qq{
SELECT status_details->>'execution_id' = '${root_loop}::5', result
FROM df.nodes WHERE instance_id = '$root_loop' AND node_type = 'LOOP'}),
		't|"done"',
		"$mode: the root loop ended in its fifth generation with its break value");
	cmp_ok($ticks_before, '<', 10, "$mode: the loops were mid-way at the restart ($ticks_before of 10 ticks)");
	last unless $ok;
}

check_engine_empty($node);
is( $node->safe_psql('postgres', q{
SELECT (SELECT count(*) FROM df_internal.signals) || ' signals, '
    || (SELECT count(*) FROM df_internal.waits) || ' waits, '
    || (SELECT count(*) FROM df_internal.loops) || ' loops'}),
	'0 signals, 0 waits, 0 loops',
	'no signal, wait or loop state left');

$node->stop('fast');
done_testing();

# Keys of locks and limits taken in opposite orders by consecutive nodes
# (docs/design/architecture.md §5 rule 1).  A chain step's transaction releases
# its LOCK's (or LIMIT's) key and takes the next one's; each change of a
# key's entries locks the key's row (df_internal.lock_keys,
# df_internal.limits) first.  Pairs of instances run x ~> y ~> x ~> y and
# y ~> x ~> y ~> x (each step under a df.with_lock or a df.limit of one key)
# on 4 executors: without the one order, two such transactions could each
# hold the row the other waits for, and PostgreSQL would break the deadlock
# after deadlock_timeout (5 deadlocks in 400 instances with locks, 3 with
# limits, on the bench's cluster; each cost a second and an engine
# error).  An engine transaction waits only for rows after the ones
# it holds (lock keys before limit keys, each by key), and takes an
# earlier one without waiting: when it is busy, the transaction runs
# again.  Every instance completes, every step ran once, no deadlock was
# detected and nothing is left in the lock and limit tables.
use strict;
use warnings;
use FindBin;
use lib "$FindBin::RealBin/../perl";
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use PgDurableTest;

my $ROLE = $PgDurableTest::ROLE;
my $PAIRS = 200;
my $node = engine_node('lock_order', 4);
my $started = 0;

# $PAIRS pairs of instances, x ~> y ~> x ~> y and y ~> x ~> y ~> x, where
# $wrap->(step, 'x' or 'y', pair) wraps a step; every step records its effect.
sub run_pairs
{
	my ($what, $wrap) = @_;
	my $offset = -s $node->logfile;
	my @sql;
	for my $i (1 .. $PAIRS)
	{
		for my $order ([qw(x y)], [qw(y x)])
		{
			my @steps = map {
				my $side = $order->[ ($_ - 1) % 2 ];
				$wrap->(qq{\$s\$INSERT INTO effects (instance_id, step) SELECT '{sys_instance_id}', 's$_'\$s\$},
					$side, $i)
			} 1 .. 4;
			push @sql, "id := df.start((" . join(' ~> ', @steps) . ")::text); "
			  . "INSERT INTO ids VALUES (id);";
		}
	}
	$node->safe_psql('postgres', qq{
SET ROLE $ROLE;
DO \$\$
DECLARE
	id text;
BEGIN
@{[ join("\n", @sql) ]}
END
\$\$;
RESET ROLE;
INSERT INTO expected SELECT id, s FROM ids, unnest(ARRAY['s1', 's2', 's3', 's4']) s;
TRUNCATE ids;
});
	$started += 2 * $PAIRS;

	wait_instances_done($node, $what) or diag_engine($node);
	check_effects($node, $started);
	my $log = slurp_file($node->logfile, $offset);
	my $deadlocks = () = $log =~ /deadlock detected/g;
	is($deadlocks, 0, "$what: no deadlock was detected");
	is($node->safe_psql('postgres', 'SELECT count(*) FROM df.check()'), '0',
		"$what: df.check() is clean");
	return;
}

$node->safe_psql('postgres', qq{
CREATE TABLE ids (id text);
GRANT INSERT ON ids TO $ROLE;
});

run_pairs('locks', sub {
	my ($step, $side, $i) = @_;
	return "df.with_lock($step, ARRAY['$side$i'])";
});
run_pairs('limits', sub {
	my ($step, $side, $i) = @_;
	return "df.limit($step, '$side$i', 1)";
});
# lock keys and limit keys: one order across both
run_pairs('a lock and a limit', sub {
	my ($step, $side, $i) = @_;
	return $side eq 'x' ? "df.with_lock($step, ARRAY['k$i'])" : "df.limit($step, 'k$i', 1)";
});

is($node->safe_psql('postgres',
		'SELECT (SELECT count(*) FROM df_internal.locks) + (SELECT count(*) FROM df_internal.lock_keys) '
		  . '+ (SELECT count(*) FROM df_internal.limit_holders) + (SELECT count(*) FROM df_internal.limit_waiters)'),
	'0', 'nothing is left in the lock and limit tables');
check_engine_empty($node);

done_testing();

# Long loops keep the engine's state bounded.  With
# pg_durable.loop_iteration_floor = 0 (no pause between iterations), three
# loops run at the same time:
#  while     a non-root loop (prefix and suffix) whose while-condition reads
#            a counter table, with a named result in its body;
#  break     a root loop whose body increments the counter and breaks once
#            it reaches the target (each iteration is a new generation);
#  join      a root do-while loop whose body is a JOIN of two named steps.
# While they run the test samples, several times, the rows each instance
# has in df_internal.tasks, results, joins, loops, runs, signals, waits and
# df.nodes, and asserts the maxima: no table grows with the number of
# iterations.  Afterwards the loops must have counted exactly to their
# targets and nothing of them may be left but their df.nodes rows.
#
# Each loop runs 10,000 iterations (PG_DURABLE_LOOP_ITERATIONS=N for the
# while and break loops, PG_DURABLE_LOOP_JOIN_ITERATIONS=N for the join
# loop, whose iterations take three steps).
use strict;
use warnings;
use FindBin;
use lib "$FindBin::RealBin/../perl";
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time usleep);
use PgDurableTest;

my $n_long = $ENV{PG_DURABLE_LOOP_ITERATIONS} // 10000;
my $n_join = $ENV{PG_DURABLE_LOOP_JOIN_ITERATIONS} // 10000;
my $workers = 2;
my $node = engine_node('loop_bounded', $workers, "pg_durable.loop_iteration_floor = 0\n");

$node->safe_psql('postgres', qq{
CREATE TABLE counters (id text PRIMARY KEY, n int NOT NULL DEFAULT 0);
GRANT INSERT, SELECT, UPDATE ON counters TO $PgDurableTest::ROLE;
});

my $iid = q{''{sys_instance_id}''};
my $bump = "UPDATE counters SET n = n + 1 WHERE id = $iid";
my %shape = (
	while => {
		graph => qq{('INSERT INTO counters (id) VALUES ($iid) RETURNING n' |=> 'start')
			~> df.loop(('$bump RETURNING n' |=> 'last'),
					   'SELECT n < $n_long FROM counters WHERE id = $iid')
			~> 'SELECT \$start AS first, \$last AS last'},
		target => $n_long,
		names => 2,
		result => qq({"rows": [{"last": $n_long, "first": 0}], "row_count": 1}),
	},
	break => {
		graph => qq{@> ('$bump RETURNING n >= $n_long AS done'
						?> df.break('done') !> 'SELECT 1')},
		target => $n_long,
		names => 0,
		result => '"done"',
	},
	join => {
		graph => qq{df.loop(('$bump RETURNING n' |=> 'l') & ('SELECT 1 AS r' |=> 'r'),
						   'SELECT n < $n_join FROM counters WHERE id = $iid')},
		target => $n_join,
		names => 2,
	},
);

my %id;
my $t0 = time;
for my $s (sort keys %shape)
{
	my $g = $shape{$s}{graph};
	if ($s ne 'while')
	{
		# no prefix step creates the counter row: create it in the
		# transaction that starts the instance
		$id{$s} = $node->safe_psql('postgres', qq{
SET ROLE $PgDurableTest::ROLE;
WITH s AS (SELECT df.start($g) AS id) INSERT INTO counters (id) SELECT id FROM s RETURNING id;});
	}
	else
	{
		$id{$s} = $node->safe_psql('postgres',
			"SET ROLE $PgDurableTest::ROLE; SELECT df.start($g);");
	}
	die "df.start returned '$id{$s}'" unless $id{$s} =~ /^[0-9a-f]{8}$/;
	$shape{$s}{nodes} = $node->safe_psql('postgres',
		"SELECT count(*) FROM df.nodes WHERE instance_id = '$id{$s}'");
}

my @tables = qw(tasks results joins loops runs signals waits);
my $sample_sql = join(",\n", map {
		my $s = $_;
		(map { "(SELECT count(*) FROM df_internal.$_ WHERE instance_id = '$id{$s}')" } @tables),
		  "(SELECT count(*) FROM df.nodes WHERE instance_id = '$id{$s}')",
		  "(SELECT n FROM counters WHERE id = '$id{$s}')",
		  "(SELECT status FROM df.instances WHERE id = '$id{$s}')"
	} sort keys %shape);

# sample until every instance has finished (deadline: 10 minutes)
my (%max, %samples_running, %progress, $done);
my $deadline = time + 600;
while (time < $deadline)
{
	my @v = split /\|/, $node->safe_psql('postgres', "SELECT $sample_sql");
	my $all_done = 1;
	for my $s (sort keys %shape)
	{
		my @row = splice(@v, 0, @tables + 3);
		my $status = pop @row;
		my $n = pop @row;
		my %r;
		@r{ @tables, 'nodes' } = @row;
		for my $t (@tables, 'nodes')
		{
			$max{$s}{$t} = $r{$t}
			  if !defined $max{$s}{$t} || $r{$t} > $max{$s}{$t};
		}
		push @{ $progress{$s} }, [ time, $n // 0 ];
		if ($status eq 'running' || $status eq 'pending')
		{
			$all_done = 0;
			# a sample in the second half of the loop shows that nothing
			# accumulated over the first
			$samples_running{$s}++ if ($n // 0) > $shape{$s}{target} / 10;
		}
	}
	if ($all_done) { $done = 1; last; }
	usleep(200_000);
}
my $elapsed = time - $t0;
ok($done, sprintf('all loops finished (%.1f s)', $elapsed));

for my $s (sort keys %shape)
{
	my $m = $max{$s};
	# iterations per second over the first and the last fifth of the loop
	my @p = grep { $_->[1] > 0 && $_->[1] < $shape{$s}{target} } @{ $progress{$s} };
	my ($first) = grep { $_->[1] >= $shape{$s}{target} / 5 } @p;
	my ($last) = grep { $_->[1] >= $shape{$s}{target} * 4 / 5 } @p;
	note(sprintf('%-5s iterations/s: %.0f in the first fifth, %.0f in the last',
			$s, $first ? ($first->[1] - $p[0][1]) / ($first->[0] - $p[0][0] || 1) : 0,
			$last ? ($p[-1][1] - $last->[1]) / ($p[-1][0] - $last->[0] || 1) : 0))
	  if @p > 2;
	note(sprintf('%-5s %6d iterations: max rows %s', $s, $shape{$s}{target},
			join(', ', map { "$_=$m->{$_}" } @tables, 'nodes')));
	cmp_ok($samples_running{$s} // 0, '>=', 3, "$s: sampled at least 3 times while running");
	is( $node->safe_psql('postgres',
			"SELECT status, (SELECT n FROM counters WHERE id = '$id{$s}') FROM df.instances WHERE id = '$id{$s}'"),
		"completed|$shape{$s}{target}",
		"$s: completed after exactly $shape{$s}{target} iterations");
	is($node->safe_psql('postgres', "SELECT df.result('$id{$s}')"), $shape{$s}{result}, "$s: result")
	  if defined $shape{$s}{result};

	# a JOIN body has two branch tasks; every other shape one task at a time
	cmp_ok($m->{tasks}, '<=', $s eq 'join' ? 2 : 1, "$s: at most " . ($s eq 'join' ? 2 : 1) . " task(s) at a time");
	# each name once in the loop's scope, and once more in a branch or
	# body scope while it is being merged
	cmp_ok($m->{results}, '<=', 2 * $shape{$s}{names}, "$s: named results bounded by the names");
	cmp_ok($m->{joins}, '<=', $s eq 'join' ? 1 : 0, "$s: JOIN counters bounded");
	cmp_ok($m->{loops}, '<=', 1, "$s: one loop row");
	cmp_ok($m->{runs}, '<=', 1, "$s: one runs row");
	is($m->{signals} + $m->{waits}, 0, "$s: no signals or waits");
	is($m->{nodes}, $shape{$s}{nodes}, "$s: df.nodes rows stay the graph's $shape{$s}{nodes}");
	is( $node->safe_psql('postgres', 'SELECT ' . join(' + ',
				map { "(SELECT count(*) FROM df_internal.$_ WHERE instance_id = '$id{$s}')" } @tables)),
		'0', "$s: no engine rows left");
}

# for the record: the physical size the churn left behind (not asserted:
# autovacuum decides when dead rows go)
note($node->safe_psql('postgres', q{
SELECT string_agg(format('%s %s (%s dead rows)', c.relname,
                         pg_size_pretty(pg_total_relation_size(c.oid)), s.n_dead_tup), ', ' ORDER BY c.relname)
FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
JOIN pg_stat_all_tables s ON s.relid = c.oid
WHERE (n.nspname = 'df_internal' OR (n.nspname = 'df' AND c.relname = 'nodes')) AND c.relkind = 'r'}));

$node->stop('fast');
done_testing();

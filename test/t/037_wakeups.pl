# No wake-up is lost (core/wake.c): every task a commit makes runnable is
# run without the executors' safety poll.  The poll is set to an hour here,
# so a task that no commit announced to the executors waits until the
# await below gives up, instead of costing 5 s.
#
# 100-branch fan-outs (a balanced tree of df.join) started and awaited one
# at a time on 4 executors: their branches complete into the inbox while
# another executor's batch holds the runs row, and the apply tasks that
# find the row held put themselves back a few milliseconds later (a future
# task announced at commit, next_due).  Two races lost such a task until the
# poll, about once in 60 fan-outs on the bench's cluster:
#	- a scan asked "what is due now?" and "what is due later?" at two
#	  moments, and a task falling due between them was in neither answer;
#	- a commit announcing a task due after the time next_due already said
#	  did not tell a scan under way, which then replaced next_due with what
#	  it had seen (nothing).
use strict;
use warnings;
use FindBin;
use lib "$FindBin::RealBin/../perl";
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use PgDurableTest;

my $ROLE = $PgDurableTest::ROLE;
my $WORKERS = 4;
my $BRANCHES = 100;
my $RUNS = 400;
my $AWAIT_S = 30;
my $node = engine_node('wakeups', $WORKERS, "pg_durable.safety_poll = '1h'\n");

sub tree
{
	my ($lo, $hi) = @_;
	return "'SELECT $lo'" if $hi - $lo == 1;
	my $mid = int(($lo + $hi) / 2);
	return 'df.join(' . tree($lo, $mid) . ', ' . tree($mid, $hi) . ')';
}

is($node->safe_psql('postgres', 'SHOW pg_durable.safety_poll'), '1h',
	'the safety poll is an hour');

$node->safe_psql('postgres', qq{
CREATE TABLE fanouts (run int PRIMARY KEY, instance_id text NOT NULL, status text NOT NULL);
GRANT INSERT, SELECT ON fanouts TO $ROLE;
CREATE TABLE graph AS SELECT (} . tree(0, $BRANCHES) . qq{)::text AS g;
GRANT SELECT ON graph TO $ROLE;
});

# One DO block: start, commit, await, record; stop at the first one not
# completed within the await (df.await_instance raises its timeout as a query cancel).
$node->safe_psql('postgres', qq{
SET ROLE $ROLE;
DO \$\$
DECLARE
	gr text := (SELECT g FROM graph);
	id text;
	st text;
BEGIN
	FOR i IN 1..$RUNS LOOP
		id := df.start(gr);
		COMMIT;
		BEGIN
			st := df.await_instance(id, $AWAIT_S);
		EXCEPTION WHEN query_canceled THEN
			st := SQLERRM;
		END;
		INSERT INTO fanouts VALUES (i, id, st);
		COMMIT;
		EXIT WHEN st <> 'completed';
	END LOOP;
END
\$\$;
});

my $stuck = $node->safe_psql('postgres',
	"SELECT run || ' ' || instance_id || ' ' || status FROM fanouts WHERE status <> 'completed'");
is($stuck, '', "every fan-out completed within ${AWAIT_S} s, without the safety poll")
  or diag_engine($node);
is($node->safe_psql('postgres', "SELECT count(*) FROM fanouts WHERE status = 'completed'"),
	$RUNS, "all $RUNS fan-outs ran");
# what the races need: completions that went to the inbox
ok($node->safe_psql('postgres',
		"SELECT last_value > 0 AND is_called FROM df_internal.inbox_id_seq") eq 't',
	'branch completions went through the inbox');
is($node->safe_psql('postgres',
		"SELECT (SELECT count(*) FROM df_internal.inbox) || ' inbox, ' "
		  . "|| (SELECT count(*) FROM df_internal.tasks) || ' tasks'"),
	'0 inbox, 0 tasks', 'nothing left in the inbox or the queue');
is($node->safe_psql('postgres', 'SELECT count(*) FROM df.check()'), '0', 'df.check() is clean');

done_testing();

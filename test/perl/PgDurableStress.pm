# The stress and chaos run, shared by test/t/014_stress.pl (the
# short form in the suite) and bench/stress (the long form).
#
# One run ("variant") starts, in ONE transaction so that they all become
# runnable at the same moment, $per instances of each of these shapes, and
# $fanouts instances of a 1,000-branch fan-out:
#
#   join2     'j1' & 'j2'
#   join3     df.join3('t1', 't2', 't3')
#   join_then ('c1' & 'c2') ~> 'c3'
#   nested    (('n1' & 'n2') & 'n3') & 'n4'           (JOINs three levels deep)
#   race      ('ra1' & 'ra2') | ('rb1' & 'rb2')
#   loop      df.loop('la<i>' & 'lb<i>', 'fewer than 6 effects')   (3 iterations)
#   deadlock  'da' & 'db' where da locks row 1 then 2 and db row 2 then 1, each
#             waiting (bounded) until the other holds its first row: a real
#             deadlock of user SQL, which the engine must retry, not fail
#   fanout    a balanced tree of binary JOINs over 'f0001' .. 'f1000'
#
# Every branch INSERTs one row (instance, branch) into "effects" (no unique
# key, so a step that ran twice shows up twice).  Then it applies the
# variant's chaos while the engine works:
#
#   none       nothing
#   kill       SIGKILL of a random busy executor every few hundred ms (each
#              kill makes the postmaster reinitialize: restart_after_crash)
#   terminate  pg_terminate_backend of a random busy executor every few
#              hundred ms (the launcher starts a new one)
#   restart    immediate shutdown and restart of the server in the middle
#   errors     a random quarter of the JOIN instances get one branch that
#              raises division_by_zero: those instances must end "failed"
#   mixed      all of it in one run: injected errors, and every few hundred
#              ms a SIGKILL or a pg_terminate_backend (at random), with the
#              immediate restarts in the middle
#
# then waits until every instance is terminal, or until nothing has
# progressed for a while (then the rest are "stranded"), and checks:
#
# - every instance has its expected status (completed, or failed where an
#   error was injected); none is left pending/running (stranded);
# - every expected effect exists exactly once (missing and duplicates are
#   counted apart), and no effect exists that should not.  A RACE of two
#   JOINs: the winner's two branches exist exactly once; a loser's branch may
#   exist at most once (one that committed before the race was decided stays,
#   one still running when it lost rolls back with its step transaction);
# - a failed JOIN instance: its failing branch left no effect, its sibling
#   branches ran (a JOIN waits for all branches), its continuation did not;
# - no "deadlock detected" in the server log from an engine statement (a
#   user-SQL deadlock is caught inside the step and retried: it shows up as a
#   step_retried event with sqlstate 40P01, counted as retried user deadlocks);
# - the engine's task queue is empty, so are its per-instance tables (runs,
#   joins, loops, waits, results), and df.check() reports nothing.
#
# The counts are printed as one block ("# stress: ..." .. "# end") and each
# must-be-zero count is a TAP assertion.
package PgDurableStress;

use strict;
use warnings;
use Exporter 'import';
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(usleep time);
use PgDurableTest;

our @EXPORT = qw(stress_node stress_run);

my @SHAPES = qw(join2 join3 join_then nested race loop deadlock);

# A cluster with $workers executors prepared for stress runs.
sub stress_node
{
	my ($name, $workers) = @_;
	my $node = engine_node($name, $workers, qq{
max_connections = 60
deadlock_timeout = '50ms'
pg_durable.loop_iteration_floor = 20
log_statement = none
});
	my $role = $PgDurableTest::ROLE;
	$node->safe_psql('postgres', <<"SQL");
-- what each instance of the run is and must end as
CREATE TABLE stress_instances (instance_id text PRIMARY KEY, shape text NOT NULL,
                               want text NOT NULL, fault text);
-- effects that may exist at most once but need not (a RACE's losing branches)
CREATE TABLE optional (instance_id text NOT NULL, step text NOT NULL);
-- the rows the deadlock shape locks in opposite orders
CREATE TABLE stress_locks (instance_id text NOT NULL, k int NOT NULL, n int NOT NULL DEFAULT 0,
                           PRIMARY KEY (instance_id, k));
GRANT INSERT, SELECT ON expected, stress_instances, optional, stress_locks TO $role;
GRANT UPDATE ON stress_locks TO $role;

-- Lock row \$first of the instance, wait (at most 1 s) until the partner
-- branch holds its first row (its advisory lock says so) or has finished,
-- then lock row \$second: when both run at once, they deadlock.
CREATE FUNCTION stress_deadlock(inst text, me text, partner text, first int, second int)
RETURNS text LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS \$f\$
DECLARE
	t0 timestamptz := clock_timestamp();
	key int := abs(hashtext(inst) % 1000000000);
BEGIN
	UPDATE public.stress_locks SET n = n + 1 WHERE instance_id = inst AND k = first;
	PERFORM pg_advisory_xact_lock(key, first);
	WHILE NOT EXISTS (SELECT 1 FROM pg_locks
	                  WHERE locktype = 'advisory' AND classid = key::oid
	                    AND objid = second::oid AND objsubid = 2 AND granted)
	  AND NOT EXISTS (SELECT 1 FROM public.effects WHERE instance_id = inst AND step = partner)
	  AND clock_timestamp() < t0 + interval '1 second'
	LOOP
		PERFORM pg_sleep(0.01);
	END LOOP;
	UPDATE public.stress_locks SET n = n + 1 WHERE instance_id = inst AND k = second;
	INSERT INTO public.effects (instance_id, step) VALUES (inst, me);
	RETURN me;
END
\$f\$;

-- The fan-out: a balanced tree of binary JOINs over n branches f0001...
CREATE FUNCTION stress_fanout(n int) RETURNS text LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp AS \$f\$
DECLARE
	parts text[];
	nxt text[];
BEGIN
	SELECT array_agg(format(\$q\$INSERT INTO public.effects (instance_id, step) VALUES ('{sys_instance_id}', 'f%s')\$q\$,
	                        lpad(g::text, 4, '0')) ORDER BY g)
	  INTO parts FROM generate_series(1, n) g;
	WHILE cardinality(parts) > 1 LOOP
		nxt := '{}';
		FOR i IN 1 .. cardinality(parts) BY 2 LOOP
			IF i < cardinality(parts) THEN
				nxt := nxt || df.join(parts[i], parts[i + 1]);
			ELSE
				nxt := nxt || parts[i];
			END IF;
		END LOOP;
		parts := nxt;
	END LOOP;
	RETURN parts[1];
END
\$f\$;
SQL
	return $node;
}

# The step of branch $b; with $fail it raises division_by_zero instead.
sub leaf
{
	my ($b, $fail) = @_;
	my $sql = "INSERT INTO public.effects (instance_id, step) SELECT '{sys_instance_id}', '$b'";
	$sql .= " WHERE 1 / (SELECT 0) = 1" if $fail;
	return "\$s\$$sql\$s\$";
}

# One shape: (graph SQL expression, expected steps, optional steps, fault)
sub shape
{
	my ($shape, $fault_on) = @_;
	my %branches = (
		join2 => [qw(j1 j2)],
		join3 => [qw(t1 t2 t3)],
		join_then => [qw(c1 c2)],
		nested => [qw(n1 n2 n3 n4)]);
	my $fault;
	if ($fault_on && $branches{$shape} && rand() < 0.25)
	{
		my @b = @{ $branches{$shape} };
		$fault = $b[ int(rand(@b)) ];
	}
	my $l = sub { leaf($_[0], defined $fault && $fault eq $_[0]) };
	my $ok = sub { grep { !defined $fault || $_ ne $fault } @_ };

	if ($shape eq 'join2')
	{
		return ("df.join(" . $l->('j1') . ", " . $l->('j2') . ")", [ $ok->(qw(j1 j2)) ], [], $fault);
	}
	if ($shape eq 'join3')
	{
		return ("df.join3(" . join(', ', map { $l->($_) } qw(t1 t2 t3)) . ")",
			[ $ok->(qw(t1 t2 t3)) ], [], $fault);
	}
	if ($shape eq 'join_then')
	{
		return ("df.seq(df.join(" . $l->('c1') . ", " . $l->('c2') . "), " . leaf('c3') . ")",
			[ $ok->(defined $fault ? qw(c1 c2) : qw(c1 c2 c3)) ], [], $fault);
	}
	if ($shape eq 'nested')
	{
		return (sprintf("df.join(df.join(df.join(%s, %s), %s), %s)", map { $l->($_) } qw(n1 n2 n3 n4)),
			[ $ok->(qw(n1 n2 n3 n4)) ], [], $fault);
	}
	if ($shape eq 'race')
	{
		return (sprintf("df.race(df.join(%s, %s), df.join(%s, %s))", map { leaf($_) } qw(ra1 ra2 rb1 rb2)),
			[], [qw(ra1 ra2 rb1 rb2)], undef);
	}
	if ($shape eq 'loop')
	{
		my $body = sub {
			my ($p) = @_;
			return "\$s\$INSERT INTO public.effects (instance_id, step) "
			  . "SELECT '{sys_instance_id}', '$p' || (count(*) + 1) FROM public.effects "
			  . "WHERE instance_id = '{sys_instance_id}' AND step LIKE '$p%'\$s\$";
		};
		return ("df.loop(df.join(" . $body->('la') . ", " . $body->('lb') . "), "
			  . "\$s\$SELECT count(*) < 6 FROM public.effects WHERE instance_id = '{sys_instance_id}'\$s\$)",
			[qw(la1 la2 la3 lb1 lb2 lb3)], [], undef);
	}
	if ($shape eq 'deadlock')
	{
		return ("df.join(\$s\$SELECT public.stress_deadlock('{sys_instance_id}', 'da', 'db', 1, 2)\$s\$, "
			  . "\$s\$SELECT public.stress_deadlock('{sys_instance_id}', 'db', 'da', 2, 1)\$s\$)",
			[qw(da db)], [], undef);
	}
	if ($shape eq 'fanout')
	{
		return ("public.stress_fanout(1000)", [ map { sprintf('f%04d', $_) } 1 .. 1000 ], [], undef);
	}
	die "unknown shape $shape";
}

sub arr
{
	my (@v) = @_;
	return "ARRAY[" . join(',', map { "'$_'" } @v) . "]::text[]";
}

# psql that tolerates a server that is down or restarting; undef on failure.
sub try_query
{
	my ($node, $sql) = @_;
	my ($out, $err) = ('', '');
	my $ret = eval { $node->psql('postgres', $sql, stdout => \$out, stderr => \$err) };
	return undef unless defined $ret && $ret == 0;
	return $out;
}

# The pids of the executors, busy ones first.
sub executor_pids
{
	my ($node) = @_;
	my $out = try_query($node, "SELECT pid FROM pg_stat_activity "
		  . "WHERE backend_type = 'pg_durable executor' ORDER BY state = 'active' DESC, random()");
	return () unless defined $out && $out ne '';
	return split /\n/, $out;
}

# "deadlock detected" errors in the log since $offset, split into those of
# user SQL (their CONTEXT names the stress function or table) and the rest.
sub log_deadlocks
{
	my ($node, $offset) = @_;
	my $log = slurp_file($node->logfile, $offset);
	my ($user, $engine) = (0, 0);
	# one entry = a line with the log prefix and its continuation lines
	my @entries = split /\n(?=\d{4}-\d\d-\d\d )/, $log;
	for my $e (@entries)
	{
		next unless $e =~ /deadlock detected/ && $e =~ /ERROR/;
		if ($e =~ /stress_deadlock|stress_locks/) { $user++ } else { $engine++; diag "engine deadlock: $e" }
	}
	return ($user, $engine);
}

# Run one variant; returns a hash of the counts.
#   per      instances of each small shape
#   fanouts  instances of the 1,000-branch fan-out
#   chaos    none | kill | terminate | restart | errors
#   kills    SIGKILLs / terminations to deliver at most (kill, terminate)
#   restarts immediate restarts (restart)
#   idle     seconds without progress after which the rest is stranded
sub stress_run
{
	my ($node, $workers, %o) = @_;
	my $chaos = $o{chaos} // 'none';
	my $per = $o{per} // 20;
	my $fanouts = $o{fanouts} // 1;
	my $idle = $o{idle} // 60;
	my %c = (kills => 0, terminations => 0, restarts => 0, faults => 0);
	my $role = $PgDurableTest::ROLE;

	$node->safe_psql('postgres', 'TRUNCATE effects, expected, optional, stress_instances, stress_locks');
	my $offset = -s $node->logfile;

	# --- start every instance in one transaction ---------------------------
	my @todo = ((map { my $s = $_; map { $s } 1 .. $per } @SHAPES), map { 'fanout' } 1 .. $fanouts);
	# interleave the shapes
	for (my $i = @todo - 1; $i > 0; $i--)
	{
		my $j = int(rand($i + 1));
		@todo[ $i, $j ] = @todo[ $j, $i ];
	}
	my $script = "SET ROLE $role;\nBEGIN;\n";
	for my $shape (@todo)
	{
		my ($graph, $want, $opt, $fault) = shape($shape, $chaos eq 'errors' || $chaos eq 'mixed');
		$c{faults}++ if defined $fault;
		my $status = defined $fault ? 'failed' : 'completed';
		my $f = defined $fault ? "'$fault'" : 'NULL';
		$script .= "WITH s AS (SELECT df.start($graph) AS id), "
		  . "x AS (INSERT INTO public.expected SELECT id, b FROM s, unnest(" . arr(@$want) . ") b), "
		  . "o AS (INSERT INTO public.optional SELECT id, b FROM s, unnest(" . arr(@$opt) . ") b), "
		  . "l AS (INSERT INTO public.stress_locks SELECT id, k FROM s, (VALUES (1), (2)) v(k) "
		  . "WHERE '$shape' = 'deadlock') "
		  . "INSERT INTO public.stress_instances SELECT id, '$shape', '$status', $f FROM s;\n";
	}
	$script .= "COMMIT;\n";
	my $t0 = time();
	my ($ret, $stdout, $stderr) = $node->psql('postgres', $script, on_error_stop => 1);
	is($ret, 0, "$chaos: " . scalar(@todo) . " instances started in one transaction")
	  or diag substr($stderr, 0, 1000);

	# --- chaos while the engine works, then wait for the end -------------------
	my $ninst = scalar @todo;
	my $max_kills = $o{kills} // 10;
	my $max_restarts = $o{restarts} // 1;
	my ($last_progress, $last_mark) = (time(), '');
	my $next_chaos = time() + 0.3;
	my $left;
	while (1)
	{
		my $mark = try_query($node,
			"SELECT (SELECT count(*) FROM df.instances i JOIN stress_instances s ON s.instance_id = i.id "
			  . "      WHERE i.status IN ('pending', 'running')) || ' ' || "
			  . "(SELECT coalesce(max(id), 0) FROM df_internal.events)");
		if (defined $mark)
		{
			($left) = split / /, $mark;
			last if $left == 0;
			if ($mark ne $last_mark) { $last_mark = $mark; $last_progress = time(); }
		}
		# (a server that is down is not progress, but is not idleness either
		# while a chaos action is still due)
		last if time() - $last_progress > $idle;

		if (time() >= $next_chaos)
		{
			$next_chaos = time() + 0.2 + rand(0.3);
			my $act = $chaos;
			if ($chaos eq 'mixed')
			{
				$act = rand() < 0.5 ? 'kill' : 'terminate';
				$act = 'restart' if $c{restarts} < $max_restarts && defined $mark
				  && $ninst - $left >= $ninst * ($c{restarts} + 1) / ($max_restarts + 2);
				$act = 'none' if $act ne 'restart' && $c{kills} + $c{terminations} >= $max_kills;
			}
			if ($act eq 'kill' && $c{kills} < $max_kills)
			{
				my ($pid) = executor_pids($node);
				$c{kills}++ if $pid && kill('KILL', $pid);
			}
			elsif ($act eq 'terminate' && $c{terminations} < $max_kills)
			{
				my ($pid) = executor_pids($node);
				my $r = $pid ? try_query($node, "SELECT pg_terminate_backend($pid)") : undef;
				$c{terminations}++ if defined $r && $r eq 't';
			}
			elsif ($act eq 'restart' && $c{restarts} < $max_restarts && defined $mark)
			{
				# in the middle: once a share of the instances has finished
				my $done = $ninst - $left;
				if ($done >= $ninst * ($c{restarts} + 1) / ($max_restarts + 2))
				{
					$node->stop('immediate');
					$node->start;
					$c{restarts}++;
					$last_progress = time();
				}
			}
		}
		usleep(100_000);
	}
	my $seconds = time() - $t0;

	# after a crash the server may still be reinitializing
	query_until($node, 'SELECT true') or die "the server did not come back";
	wait_engine_ready($node, $workers);

	# --- the checks ------------------------------------------------------------
	my $q = sub { $node->safe_psql('postgres', $_[0]) };
	my $mine = "instance_id IN (SELECT instance_id FROM stress_instances)";
	$c{instances} = $ninst;
	$c{completed} = $q->("SELECT count(*) FROM df.instances WHERE status = 'completed' AND id IN "
		  . "(SELECT instance_id FROM stress_instances)");
	$c{failed} = $q->("SELECT count(*) FROM df.instances WHERE status = 'failed' AND id IN "
		  . "(SELECT instance_id FROM stress_instances)");
	$c{stranded} = $q->("SELECT count(*) FROM stress_instances s LEFT JOIN df.instances i "
		  . "ON i.id = s.instance_id WHERE i.status IS NULL OR i.status IN ('pending', 'running')");
	$c{wrong_status} = $q->("SELECT count(*) FROM stress_instances s JOIN df.instances i "
		  . "ON i.id = s.instance_id WHERE i.status NOT IN ('pending', 'running') AND i.status <> s.want");
	$c{steps} = $q->("SELECT count(*) FROM df_internal.events e JOIN df.nodes n "
		  . "ON n.instance_id = e.instance_id AND n.id = e.node_id "
		  . "WHERE e.kind IN ('node_completed', 'node_failed') AND n.node_type = 'SQL' AND e.$mine");
	$c{retried_user_deadlocks} = $q->("SELECT count(*) FROM df_internal.events "
		  . "WHERE kind = 'step_retried' AND detail->>'sqlstate' = '40P01' AND $mine");
	$c{retries} = $q->("SELECT count(*) FROM df_internal.events WHERE kind = 'step_retried' AND $mine");
	$c{duplicates} = $q->("SELECT count(*) FROM (SELECT 1 FROM effects WHERE $mine "
		  . "GROUP BY instance_id, step HAVING count(*) > 1) d");
	$c{missing} = $q->("SELECT count(*) FROM expected x WHERE NOT EXISTS "
		  . "(SELECT 1 FROM effects e WHERE e.instance_id = x.instance_id AND e.step = x.step)")
	  # a RACE must have one whole JOIN side
	  + $q->("SELECT count(*) FROM stress_instances s WHERE shape = 'race' AND NOT EXISTS "
		  . "(SELECT 1 FROM (VALUES ('ra1', 'ra2'), ('rb1', 'rb2')) side(a, b) "
		  . " WHERE EXISTS (SELECT 1 FROM effects e WHERE e.instance_id = s.instance_id AND e.step = side.a) "
		  . "   AND EXISTS (SELECT 1 FROM effects e WHERE e.instance_id = s.instance_id AND e.step = side.b))");
	$c{unexpected} = $q->("SELECT count(*) FROM effects e WHERE NOT EXISTS "
		  . "(SELECT 1 FROM expected x WHERE x.instance_id = e.instance_id AND x.step = e.step) "
		  . "AND NOT EXISTS (SELECT 1 FROM optional o WHERE o.instance_id = e.instance_id AND o.step = e.step)");
	$c{tasks_left} = $q->("SELECT count(*) FROM df_internal.tasks");
	# every instance has finished: no engine state may be left either
	$c{state_left} = $q->("SELECT (SELECT count(*) FROM df_internal.runs) "
		  . "+ (SELECT count(*) FROM df_internal.joins) + (SELECT count(*) FROM df_internal.loops) "
		  . "+ (SELECT count(*) FROM df_internal.waits) + (SELECT count(*) FROM df_internal.results)");
	$c{check_problems} = $q->("SELECT count(*) FROM df.check()");
	($c{user_deadlocks_in_log}, $c{engine_deadlocks}) = log_deadlocks($node, $offset);
	$c{seconds} = sprintf('%.1f', $seconds);

	if ($c{stranded} > 0)
	{
		diag "stranded: " . $q->(q{
SELECT string_agg(format('%s %s %s (%s tasks)', s.instance_id, s.shape, i.status,
                         (SELECT count(*) FROM df_internal.tasks t WHERE t.instance_id = s.instance_id)), ', ')
FROM stress_instances s LEFT JOIN df.instances i ON i.id = s.instance_id
WHERE i.status IS NULL OR i.status IN ('pending', 'running')});
	}
	if ($c{check_problems} > 0)
	{
		diag "df.check(): " . $q->("SELECT string_agg(format('%s %s %s', instance_id, problem, detail), E'\\n') "
			  . "FROM (SELECT * FROM df.check() LIMIT 20) c");
	}
	if ($c{wrong_status} > 0)
	{
		diag "wrong status: " . $q->(q{
SELECT string_agg(format('%s %s want %s got %s', s.instance_id, s.shape, s.want, i.status), ', ')
FROM stress_instances s JOIN df.instances i ON i.id = s.instance_id
WHERE i.status NOT IN ('pending', 'running') AND i.status <> s.want});
	}

	my @lines = (
		[ 'executors', $workers ],
		[ 'instances', $c{instances} ],
		[ '  completed', $c{completed} ],
		[ '  failed', $c{failed} ],
		[ 'steps (SQL steps ended)', $c{steps} ],
		[ 'injected step errors', $c{faults} ],
		[ 'executor kills (SIGKILL)', $c{kills} ],
		[ 'executor terminations', $c{terminations} ],
		[ 'server restarts (immediate)', $c{restarts} ],
		[ 'step retries', $c{retries} ],
		[ 'retried user deadlocks', $c{retried_user_deadlocks} ],
		[ 'engine deadlocks', $c{engine_deadlocks} ],
		[ 'stranded instances', $c{stranded} ],
		[ 'wrong final status', $c{wrong_status} ],
		[ 'duplicate effects', $c{duplicates} ],
		[ 'missing effects', $c{missing} ],
		[ 'unexpected effects', $c{unexpected} ],
		[ 'tasks left in queue', $c{tasks_left} ],
		[ 'engine rows left', $c{state_left} ],
		[ 'df.check() problems', $c{check_problems} ],
		[ 'seconds', $c{seconds} ]);
	diag "stress: chaos=$chaos";
	diag sprintf("  %-30s %s", @$_) for @lines;
	diag "end";

	is($c{$_}, 0, "$chaos: $_ = 0")
	  for qw(engine_deadlocks stranded wrong_status duplicates missing unexpected tasks_left state_left
	  check_problems);
	is($c{completed} + $c{failed}, $ninst, "$chaos: every instance ended");
	is($c{failed}, $c{faults}, "$chaos: exactly the instances with an injected error failed");
	return \%c;
}

1;

# Events under crashes: 500 events are published, each in its
# own transaction, while executors are SIGKILLed (each kill makes the
# postmaster reinitialize the server, so publishers lose their connection
# too: an event is committed or not).  Afterwards:
# - every subscription started exactly one instance per committed event
#   its filter matches (idempotency key sub:<name>:<event id>), none for
#   the others, and each instance's step ran once with its $event;
# - 20 instances that waited for one event each (df.wait_for_event with a
#   filter naming it) received exactly that event;
# df.check() is clean; then retention removes the events older than
# pg_durable.retention_days (with the takes of them), and only those.
use strict;
use warnings;
use FindBin;
use lib "$FindBin::RealBin/../perl";
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(usleep);
use PgDurableTest;

my $ROLE = $PgDurableTest::ROLE;
my $workers = 2;
# retention runs every 2 s (with reconciliation), for the last check
my $node = engine_node('events_kill', $workers, "pg_durable.reconcile_interval = 2\n");
my $EVENTS = 500;

$node->safe_psql('postgres', qq{
GRANT EXECUTE ON FUNCTION df.publish_event(text, jsonb, text) TO $ROLE;
GRANT EXECUTE ON FUNCTION df.subscribe(text, text, text, jsonb) TO $ROLE;
CREATE TABLE seen (sub text NOT NULL, event_id bigint NOT NULL, n int NOT NULL);
GRANT INSERT, SELECT ON seen TO $ROLE;
SET ROLE $ROLE;
SELECT df.subscribe('all', 'orders',
  'INSERT INTO seen SELECT ''all'', \$event.event_id::bigint, (\$event.payload::jsonb->>''n'')::int FROM pg_sleep(0.01)');
SELECT df.subscribe('even', 'orders',
  'INSERT INTO seen SELECT ''even'', \$event.event_id::bigint, (\$event.payload::jsonb->>''n'')::int',
  '{"even": true}');
});

# 20 waiters, for the events n = 25, 50, ..., 500
my %waiter;
for (my $n = 25; $n <= $EVENTS; $n += 25)
{
	$waiter{$n} = $node->safe_psql('postgres',
		"SET ROLE $ROLE; SELECT df.start(df.wait_for_event('orders', '{\"n\": $n}'), 'waiter-$n');");
}

sub executor_pid
{
	my $pid = '';
	$node->psql('postgres',
		"SELECT pid FROM pg_stat_activity WHERE backend_type = 'pg_durable executor' ORDER BY random() LIMIT 1",
		stdout => \$pid);
	return $pid;
}

# publish in rounds of 25, one transaction each; kill an executor during
# every other round
my $kills = 0;
my $lost = 0;
for (my $round = 0; $round < $EVENTS / 25; $round++)
{
	my $sql = join('',
		map {
			my $n = $round * 25 + $_;
			my $even = $n % 2 == 0 ? 'true' : 'false';
			"SELECT df.publish_event('orders', '{\"n\": $n, \"even\": $even}');\n"
		} 1 .. 25);
	my $pid = $round % 2 == 1 ? executor_pid() : '';
	my $offset = -s $node->logfile;
	# the statements from a file, not a pipe: a crash ends psql before it
	# has read them all, and a pipe would die of EPIPE here
	my $file = "${PostgreSQL::Test::Utils::tmp_check}/publish_$round.sql";
	PostgreSQL::Test::Utils::append_to_file($file, "SET ROLE $ROLE;\n$sql");
	my $h = IPC::Run::start(
		[ 'psql', '-XAtq', '-d', $node->connstr('postgres'), '-f', $file ],
		'<', \undef, '>', \my $out, '2>', \my $err);
	if ($pid =~ /^\d+$/)
	{
		usleep(int(rand(60_000)));
		if (kill('KILL', $pid))
		{
			$kills++;
			$node->wait_for_log(qr/all server processes terminated; reinitializing/, $offset);
		}
	}
	$h->finish;
	wait_engine_ready($node, $workers) if $pid =~ /^\d+$/;
	# what the crash cut off is published again (while the next round's kill
	# is still to come): an event committed whose reply was lost is not;
	# by the same role, whose own topic 'orders' is
	$lost += $node->safe_psql('postgres', qq{
DROP TABLE IF EXISTS lost_n;
CREATE TABLE lost_n AS SELECT n FROM generate_series($round * 25 + 1, $round * 25 + 25) n
WHERE NOT EXISTS (
  SELECT 1 FROM df_internal.bus_events b WHERE regexp_replace(b.topic, '^~[0-9]+/', '') = 'orders' AND (b.payload->>'n')::int = n);
GRANT SELECT ON lost_n TO $ROLE;
SET ROLE $ROLE;
SELECT count(df.publish_event('orders', jsonb_build_object('n', n, 'even', n % 2 = 0))) FROM lost_n});
}
ok($kills >= 5, "$kills executors SIGKILLed while events were published");

is( $node->safe_psql('postgres', q{
SELECT count(*) || ' events, ' || count(DISTINCT payload->>'n') || ' distinct'
FROM df_internal.bus_events WHERE regexp_replace(topic, '^~[0-9]+/', '') = 'orders'}),
	"$EVENTS events, $EVENTS distinct", "$EVENTS events committed ($lost of them published again after a crash cut them off)");
wait_instances_done($node, 'subscribers and waiters');

is( $node->safe_psql('postgres', q{
SELECT count(*) FROM df_internal.bus_events b
CROSS JOIN (VALUES ('all'), ('even')) s(sub)
WHERE regexp_replace(b.topic, '^~[0-9]+/', '') = 'orders' AND (s.sub = 'all' OR b.payload @> '{"even": true}')
  AND (SELECT count(*) FROM df.instances i
       WHERE i.idempotency_key = 'sub:' || s.sub || ':' || b.id) <> 1}),
	'0', 'every subscription started exactly one instance per matching event');
is( $node->safe_psql('postgres', q{
SELECT count(*) FROM df.instances i
WHERE i.idempotency_key LIKE 'sub:even:%' AND NOT EXISTS (
  SELECT 1 FROM df_internal.bus_events b
  WHERE 'sub:even:' || b.id = i.idempotency_key AND b.payload @> '{"even": true}')}),
	'0', 'no instance for an event the filter does not match');
is( $node->safe_psql('postgres', q{
SELECT count(*) FROM df.instances WHERE idempotency_key LIKE 'sub:%' AND status <> 'completed'}),
	'0', 'every subscriber instance completed');
is( $node->safe_psql('postgres', q{
SELECT (SELECT count(*) FROM seen) = (SELECT count(*) FROM df.instances WHERE idempotency_key LIKE 'sub:%')
   AND NOT EXISTS (SELECT 1 FROM seen GROUP BY sub, event_id HAVING count(*) > 1)
   AND NOT EXISTS (SELECT 1 FROM seen s JOIN df_internal.bus_events b ON b.id = s.event_id
                   WHERE (b.payload->>'n')::int <> s.n)}),
	't', 'each subscriber step ran once, with its own $event');

my $wrong = 0;
for my $n (sort { $a <=> $b } keys %waiter)
{
	my $got = $node->safe_psql('postgres',
		"SELECT df.result('$waiter{$n}')::jsonb->'payload'->>'n'");
	$wrong++ unless $got eq $n;
	diag "waiter $n received '$got'" unless $got eq $n;
}
is($wrong, 0, 'each of the 20 waiters received its event');

is($node->safe_psql('postgres', 'SELECT count(*) FROM df.check()'), '0', 'df.check() clean')
  or diag $node->safe_psql('postgres', 'SELECT * FROM df.check()');

# retention: age 100 of the events past pg_durable.retention_days (30)
my $total = $node->safe_psql('postgres', 'SELECT count(*) FROM df_internal.bus_events');
$node->safe_psql('postgres', q{
UPDATE df_internal.bus_events SET published_at = now() - interval '31 days'
WHERE id IN (SELECT id FROM df_internal.bus_events ORDER BY id LIMIT 100)});
ok(query_until($node, "SELECT count(*) = $total - 100 FROM df_internal.bus_events"),
	'retention removed the 100 events older than retention_days');
is( $node->safe_psql('postgres', q{
SELECT count(*) FROM df_internal.bus_takes t
WHERE NOT EXISTS (SELECT 1 FROM df_internal.bus_events b WHERE b.id = t.event_id)}),
	'0', 'their takes went with them');

$node->stop('fast');
done_testing();

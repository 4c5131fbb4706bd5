# pg_durable.log_workflow_sql (restart, default on) and pg_durable.host
# (restart, accepted and ignored).
#
# Off: no text of a step's statement reaches the server log.  The steps
# here carry markers in their SQL: one raises a WARNING from a PL/pgSQL
# function (its log line would have a CONTEXT quoting the statement), one
# fails with an error whose message quotes a literal of the statement, one
# reads its own pg_stat_activity row.  With log_min_messages = debug1 the
# log must hold none of the markers, the failure's line gives the error code,
# and the step's activity names the step instead of its SQL.
#
# On: the statement is logged at DEBUG1 before it runs, the failure's line
# gives its message, and the activity is the statement.
#
# pg_durable.host names a host that does not resolve: pg_durable opens no
# connection to its server, so steps run all the same.
use strict;
use warnings;
use FindBin;
use lib "$FindBin::RealBin/../perl";
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use PgDurableTest;

my $ROLE = $PgDurableTest::ROLE;
# (log_statement = none: the test's own statements, which hold the markers,
# are not logged)
my $node = engine_node('log_sql', 1, qq{
log_statement = none
pg_durable.log_workflow_sql = off
pg_durable.host = 'no-such-host.invalid'
});

$node->safe_psql('postgres', qq{
CREATE FUNCTION warn_me(t text) RETURNS int LANGUAGE plpgsql AS \$\$
BEGIN
	RAISE WARNING 'warn_me was called';
	RETURN 1;
END \$\$;
GRANT pg_read_all_stats TO $ROLE;
});

is($node->safe_psql('postgres', 'SHOW pg_durable.log_workflow_sql'), 'off',
	'log_workflow_sql is off');
is($node->safe_psql('postgres', 'SHOW pg_durable.host'), 'no-such-host.invalid',
	'pg_durable.host is accepted');

# Start the three steps with marker $m, wait for them, and return the
# activity the third one saw and the statuses.
sub run_markers
{
	my ($m) = @_;
	my $ids = $node->safe_psql('postgres', qq{
SET ROLE $ROLE;
SELECT string_agg(df.start(q), ',' ORDER BY q) FROM (VALUES
	(\$q\$SELECT warn_me('$m-warn')\$q\$),
	(\$q\$SELECT '$m-fail'::int\$q\$),
	(\$q\$SELECT query AS activity, '$m-activity' AS marker FROM pg_stat_activity WHERE pid = pg_backend_pid()\$q\$)) v(q)});
	wait_instances_done($node, "markers $m");
	my $statuses = $node->safe_psql('postgres', qq{
SELECT string_agg(status, ',' ORDER BY id) FROM df.instances WHERE id = ANY (string_to_array('$ids', ','))});
	my $activity = $node->safe_psql('postgres', qq{
SELECT n.result->'rows'->0->>'activity' FROM df.nodes n
WHERE n.instance_id = ANY (string_to_array('$ids', ',')) AND n.result::text LIKE '%$m-activity%'});
	return ($statuses, $activity);
}

# what the log gained since $offset
sub log_since
{
	my ($offset) = @_;
	my $log = slurp_file($node->logfile);
	return substr($log, $offset);
}

$node->safe_psql('postgres', 'ALTER SYSTEM SET log_min_messages = debug1; SELECT pg_reload_conf()');
my $offset = -s $node->logfile;
my ($statuses, $activity) = run_markers('hidden');
like($statuses, qr/failed/, 'off: the failing step failed');
like($activity, qr/^pg_durable: step [0-9a-f]{8} of instance [0-9a-f]{8}$/,
	'off: the activity of a running step names it instead of its SQL');
# the WARNING is written, the failure too; the function's call is mentioned
# only by what follows the log line's prefix, never by its statement
my $log = log_since($offset);
like($log, qr/warn_me was called/, 'off: the WARNING of the step is logged');
like($log, qr/failed: error code sql:22P02 \(pg_durable\.log_workflow_sql is off\)/,
	'off: the failure is logged with its error code');
unlike($log, qr/hidden-/, 'off: no text of a step\'s statement is in the log');
# (a DEBUG1 message of the server, a catalog cache's rehash, can come while
# one of the engine's own statements runs: its CONTEXT quotes that
# statement, which holds no data of a step)
my @quoted = grep { !/df_internal\.|OPERATOR\(pg_catalog\./ } ($log =~ /(SQL statement ".*)/g);
is(join("\n", @quoted), '', 'off: no CONTEXT quotes a statement of a step');

# on (the default): the statement and the messages are logged
$node->append_conf('postgresql.conf', "pg_durable.log_workflow_sql = on\n");
$node->restart;
wait_engine_ready($node, 1);
is($node->safe_psql('postgres', 'SHOW pg_durable.log_workflow_sql'), 'on',
	'log_workflow_sql is on after the restart');
$offset = -s $node->logfile;
($statuses, $activity) = run_markers('shown');
like($activity, qr/shown-activity/, 'on: the activity of a running step is its SQL');
$log = log_since($offset);
like($log, qr/runs: SELECT warn_me\('shown-warn'\)/, 'on: the statement is logged at DEBUG1');
like($log, qr/invalid input syntax for type integer: "shown-fail"/,
	'on: the failure is logged with its message');

check_df_clean($node, 'the markers');
$node->stop;
done_testing();

# What a step sees of who it is, where the regress test
# security_session_user.sql cannot look: a superuser submitter (superuser
# instances on, a restart setting) and steps in another database, which run
# in a background session of their own (steps/remote.c).  In each, the
# submitter is current_user and session_user and is_superuser is the
# submitter's; afterwards the executors' and the sessions' own role is the
# worker role again, so the engine still works.
use strict;
use warnings;
use FindBin;
use lib "$FindBin::RealBin/../perl";
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use PgDurableTest;

my $node = engine_node('step_identity', 2, "pg_durable.enable_superuser_instances = on\n");
$node->safe_psql('postgres', q{
CREATE ROLE boss LOGIN SUPERUSER;
CREATE ROLE plain LOGIN;
SELECT df.grant_usage('plain');
CREATE DATABASE otherdb;
});

my $whoami = q{'SELECT format(''%s %s %s %s'', current_user, session_user, }
  . q{current_setting(''is_superuser''), current_database()) AS seen'};

# Start $graph as $role, wait for it, and return what its step saw.
sub seen_by
{
	my ($role, $args) = @_;
	my $id = $node->safe_psql('postgres', "SET ROLE $role; SELECT df.start($args)");
	is($node->safe_psql('postgres', "SELECT df.await_instance('$id', 60)"),
		'completed', "$role: the instance ($args) completes");
	return $node->safe_psql('postgres', qq{
SELECT n.result -> 'rows' -> 0 ->> 'seen' FROM df.instances i
JOIN df.nodes n ON n.instance_id = i.id AND n.id = i.root_node WHERE i.id = '$id'});
}

is(seen_by('boss', $whoami), 'boss boss on postgres',
	'a superuser submitter: its own name, is_superuser on');
is(seen_by('plain', $whoami), 'plain plain off postgres',
	'then an ordinary role: its own name, is_superuser off');
is(seen_by('plain', "$whoami, 'remote', database => 'otherdb'"),
	'plain plain off otherdb', 'a step in another database: the same');
is(seen_by('boss', "$whoami, 'remote', database => 'otherdb'"),
	'boss boss on otherdb', 'and a superuser one there');
is(seen_by('plain', "$whoami, 'remote', database => 'otherdb'"),
	'plain plain off otherdb', 'and an ordinary role after it in the same session');

# the engine's own work after all of these (a two-step sequence: a start,
# a step, its transition, the next step) still runs as the worker role
is(seen_by('plain', "df.seq('SELECT 1', $whoami)"), 'plain plain off postgres',
	'a sequence after them runs');
is( $node->safe_psql('postgres', q{
SELECT count(*) FROM df.instances WHERE status <> 'completed'}),
	'0', 'every instance completed');

$node->stop;
done_testing();

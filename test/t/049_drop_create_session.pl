# A script written for pg_durable 0.2.6 that drops and creates the
# extension several times in one session, starting and awaiting a
# workflow after each CREATE EXTENSION, runs unchanged: the session's
# prepared row checks (common/row_prep.c) give the slots of the dropped
# tables to the new ones.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use FindBin;
use lib "$FindBin::Bin/../perl";
use PgDurableTest;

my $node = engine_node('drop_create_session', 1);
my $role = $PgDurableTest::ROLE;

my $cycle = qq{
DROP EXTENSION pg_durable CASCADE;
CREATE EXTENSION pg_durable;
SELECT df.grant_usage('$role');
SET ROLE $role;
SELECT df.start('SELECT 41 + 1 AS answer') AS id \\gset
SELECT df.await_instance(:'id', 120) AS status, df.result(:'id') AS result;
RESET ROLE;
};

# a first workflow before any drop: the session's row checks are prepared
my $script = qq{
SELECT df.grant_usage('$role');
SET ROLE $role;
SELECT df.start('SELECT 1') AS id \\gset
SELECT df.await_instance(:'id', 120) AS status;
RESET ROLE;
} . ($cycle x 4);

my ($ret, $out, $err) = $node->psql('postgres', $script, timeout => 600,
	extra_params => [ '-v', 'ON_ERROR_STOP=1' ]);
is($ret, 0, 'four drop and create cycles in one session ran') or diag $err;
unlike($err, qr/prepared row checks/, 'no "more than 4 tables with prepared row checks"');
my @lines = grep { /\|/ } split /\n/, $out;
is(scalar(@lines), 4, 'a workflow completed after each CREATE EXTENSION');
is($_, 'completed|{"rows": [{"answer": 42}], "row_count": 1}', 'its result')
  for @lines;

$node->stop;
done_testing();

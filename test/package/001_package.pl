# The Debian package (scripts/build-deb), unpacked over a private copy of the
# server's installation by test/run's "package" layer, which puts its
# binaries first on the PATH: the extension is created from the package's
# files and a workflow runs.  The layer passes the package's version as
# PGD_PACKAGE_VERSION.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use FindBin;
use lib "$FindBin::Bin/../perl";
use PgDurableTest;

my $version = $ENV{PGD_PACKAGE_VERSION} or die "PGD_PACKAGE_VERSION is not set";
my $node = engine_node('package', 1);

is($node->safe_psql('postgres', "SELECT extversion FROM pg_extension WHERE extname = 'pg_durable'"),
	$version, "the package's version $version is created");
like($node->safe_psql('postgres', 'SELECT df.version()'), qr/^\Q$version\E \(built /,
	"the package's library answers");
is($node->safe_psql('postgres',
		"SELECT string_agg(version, ',' ORDER BY version) FROM pg_available_extension_versions "
		  . "WHERE name = 'pg_durable'"),
	join(',', sort ('0.3.0', $version)),
	'the package installs the old version\'s script too');

my $id = start_instance($node,
	sprintf("df.seq(df.seq('%s', df.sleep(1)), '%s')", step_sql('p1', 0.1), step_sql('p2', 0.1)),
	'p1', 'p2');
wait_instances_done($node, 'a workflow from the package');
check_effects($node, 1);
is($node->safe_psql('postgres', "SELECT df.status('$id')"), 'completed', 'df.status');

$node->stop;
done_testing();

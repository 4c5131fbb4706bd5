# Backups round-trip: pg_dump -Fc a database while instances
# run (chains, a JOIN, sleeps, a signal wait, an HTTP call in flight, two
# submitting roles), restore it with a plain pg_restore -d into a fresh
# cluster whose roles have other OIDs, and every instance finishes there,
# each effect exactly once (the effects table is dumped too), df.check()
# clean and the engine's sequences ahead of the restored ids.
#
# A second restore loads the engine's runs rows last, in a pg_restore of
# their own: until they arrive the executors must leave the restored tasks
# alone (a task whose runs row is missing is not thrown away), and the
# instances still finish once the rows are there.  Each restore holds the
# workers until df.resume_restored() (t/046 tests the hold itself); here it
# is called after each part.
use strict;
use warnings;
use FindBin;
use lib "$FindBin::RealBin/../perl";
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use IPC::Run;
use Time::HiRes qw(usleep);
use PgDurableTest;

my $base = start_http_server();
my $conf = "pg_durable.http_allow_private = on\n";
my $src = engine_node('dump_src', 2, $conf);
my $role = $PgDurableTest::ROLE;
my $role2 = 'df_user2';
my @seqs = qw(tasks_id_seq signals_id_seq results_seq_seq waits_seq_seq events_id_seq);

# a cluster that has handed out many ids already
$src->safe_psql('postgres', join('',
	"CREATE ROLE $role2 LOGIN; GRANT INSERT, SELECT ON effects TO $role2;",
	"SELECT df.grant_usage('$role', include_http => true);",
	"SELECT df.grant_usage('$role2');",
	map { "SELECT setval('df_internal.$_', 100000);" } @seqs));

sub start_as
{
	my ($node, $who, $graph, @steps) = @_;
	my $id = $node->safe_psql('postgres', "SET ROLE $who; SELECT df.start($graph);");
	die "df.start returned '$id'" unless $id =~ /^[0-9a-f]{8}$/;
	$node->safe_psql('postgres',
		"INSERT INTO expected VALUES " . join(', ', map { "('$id', '$_')" } @steps));
	return $id;
}

sub effect
{
	my ($step) = @_;
	return "'INSERT INTO effects (instance_id, step) VALUES (''{sys_instance_id}'', ''$step'')'";
}

my %id;
$id{done} = start_as($src, $role, effect('done'), 'done');
$src->poll_query_until('postgres',
	"SELECT status = 'completed' FROM df.instances WHERE id = '$id{done}'")
  or die "the first instance did not complete";
$id{chain} = start_as($src, $role,
	join(' ~> ', effect('c1'), effect('c2'), 'df.sleep(10)', effect('c3'), effect('c4')),
	qw(c1 c2 c3 c4));
$id{join} = start_as($src, $role,
	'df.seq(df.join(' . effect('j1') . ', df.sleep(10) ~> ' . effect('j2') . '), ' . effect('j3') . ')',
	qw(j1 j2 j3));
$id{sleep} = start_as($src, $role, 'df.sleep(10) ~> ' . effect('z1'), 'z1');
$id{signal} = start_as($src, $role,
	"(df.wait_for_signal('go') |=> 'sig') ~> "
	  . "'INSERT INTO effects (instance_id, step) SELECT ''{sys_instance_id}'', ''sig:'' || \$sig.data'",
	'sig:hello');
$id{http} = start_as($src, $role,
	"(df.http('$base/delay/3000', 'GET', NULL, NULL, 10) |=> 'h') ~> "
	  . "'INSERT INTO effects (instance_id, step) SELECT ''{sys_instance_id}'', ''after_'' || \$h.status'",
	'after_200');
$id{other} = start_as($src, $role2,
	join(' ~> ', effect('o1'), 'df.sleep(10)', effect('o2')), qw(o1 o2));

# dump while they are in flight: the sleeps wait on their timers, the JOIN
# has one branch done, the SIGNAL node waits and the HTTP call is leased
$src->poll_query_until('postgres', qq{
SELECT (SELECT count(DISTINCT instance_id) FROM df_internal.tasks
        WHERE kind = 'timer' AND instance_id IN ('$id{chain}', '$id{join}', '$id{sleep}', '$id{other}')) = 4
   AND EXISTS (SELECT FROM df_internal.waits WHERE instance_id = '$id{signal}')
   AND EXISTS (SELECT FROM df_internal.tasks WHERE instance_id = '$id{http}' AND lease_token IS NOT NULL)
   AND EXISTS (SELECT FROM effects WHERE instance_id = '$id{join}' AND step = 'j1')})
  or die "the instances did not reach their waits";
my %seq_before = map {
	$_ => $src->safe_psql('postgres', "SELECT last_value FROM df_internal.$_")
} @seqs;
my %oid_src = map {
	$_ => $src->safe_psql('postgres', "SELECT oid FROM pg_roles WHERE rolname = '$_'")
} ($role, $role2);
my $dump = "$PostgreSQL::Test::Utils::tmp_check/src.dump";
my ($out, $err) = ('', '');
ok( IPC::Run::run(
		[ 'pg_dump', '-Fc', '-d', $src->connstr('postgres'), '-f', $dump ],
		'>', \$out, '2>', \$err),
	'pg_dump -Fc while instances run');
unlike($err, qr/circular foreign-key constraints among these tables/,
	'pg_dump finds no foreign-key cycle between the extension\'s tables');
$src->stop('fast');
my $instances = `pg_restore -a -n df -t instances -f - $dump`;
die "pg_restore -f - failed" if $? != 0;
is(scalar(() = $instances =~ /\trunning\t/g), 6, 'the dump holds six running instances');

# A fresh cluster where the roles exist, created in another order after
# some others, so that their OIDs differ from the source's.
sub target
{
	my ($name, $workers) = @_;
	my $node = engine_cluster($name, $workers, $conf);
	$node->safe_psql('postgres',
		"CREATE ROLE dummy_a; CREATE ROLE dummy_b; CREATE ROLE dummy_c; "
		  . "CREATE ROLE $role2 LOGIN; CREATE ROLE dummy_d; CREATE ROLE $role LOGIN;");
	for my $r ($role, $role2)
	{
		isnt($node->safe_psql('postgres', "SELECT oid FROM pg_roles WHERE rolname = '$r'"),
			$oid_src{$r}, "$name: $r has another OID than in the source");
	}
	return $node;
}

sub restore
{
	my ($node, @opts) = @_;
	my ($o, $e) = ('', '');
	my $ok = IPC::Run::run(
		[ 'pg_restore', @opts, '-d', $node->connstr('postgres'), $dump ],
		'>', \$o, '2>', \$e);
	diag $e if $e ne '';
	return $ok && $e eq '';
}

sub finish_and_check
{
	my ($node, $what, $ninstances) = @_;
	# the restore is complete: the workers held its rows until now
	$node->safe_psql('postgres', 'SELECT df.resume_restored()');
	$node->safe_psql('postgres',
		"SET ROLE $role; SELECT df.signal('$id{signal}', 'go', 'hello');");
	wait_instances_done($node, $what);
	check_effects($node, $ninstances);
	is($node->safe_psql('postgres', 'SELECT count(*) FROM df.check()'),
		'0', "$what: df.check() is clean");
	check_engine_empty($node);
	return;
}

# --- 1. a plain pg_restore -d ------------------------------------------------
my $dst = target('dump_dst', 2);
ok(restore($dst), 'pg_restore -d into a fresh cluster, without errors');
wait_engine_ready($dst, 2);
is( $dst->safe_psql('postgres', 'SELECT count(*) FROM df.instances'),
	'7', 'every instance was restored');
for my $s (@seqs)
{
	cmp_ok($dst->safe_psql('postgres', "SELECT last_value FROM df_internal.$s"),
		'>=', $seq_before{$s}, "the sequence $s is restored");
}
finish_and_check($dst, 'restored', 7);
is( $dst->safe_psql('postgres',
		"SELECT submitted_by::text FROM df.instances WHERE id = '$id{other}'"),
	$role2, 'the second role\'s instance is still its own');
# a new instance gets ids of its own beside the restored ones
start_as($dst, $role, effect('new'), 'new');
wait_instances_done($dst, 'a new instance after the restore');
check_effects($dst, 8);
$dst->stop('fast');

# --- 2. the runs rows arrive last ---------------------------------------------
my $gate = target('dump_gate', 1);
my $list = `pg_restore -l $dump`;
die "pg_restore -l failed" if $? != 0;
my @runs = grep { /TABLE DATA df_internal runs / } split /\n/, $list;
is(scalar(@runs), 1, 'the dump holds the runs rows');
my ($first, $last) =
  ("$PostgreSQL::Test::Utils::tmp_check/first.list", "$PostgreSQL::Test::Utils::tmp_check/last.list");
open(my $fh, '>', $first) or die "$first: $!";
print $fh join("\n", grep { !/TABLE DATA df_internal runs / } split /\n/, $list), "\n";
close $fh;
open($fh, '>', $last) or die "$last: $!";
print $fh "$runs[0]\n";
close $fh;

# how many tasks the dump holds, from its COPY data
my $copy = `pg_restore -a -n df_internal -t tasks -f - $dump`;
die "pg_restore -f - failed" if $? != 0;
my ($rows) = $copy =~ /^COPY df_internal\.tasks .*?\n(.*?)^\\\.$/ms;
my $ntasks = () = ($rows // '') =~ /\n/g;
cmp_ok($ntasks, '>', 0, "the dump holds $ntasks tasks");

ok(restore($gate, '-L', $first), 'restore everything but the runs rows');
wait_engine_ready($gate, 1);
# released as if the restore were complete (docs/design/restores.md)
$gate->safe_psql('postgres', 'SELECT df.resume_restored()');
# Once the restored timers are due, a new instance's first task comes after
# them in the queue: when it has run, the executor has looked at them.
query_until($gate,
	"SELECT count(*) = 0 FROM df_internal.tasks WHERE kind <> 'http' AND run_at > clock_timestamp()")
  or die "the restored timers did not fall due";
my $probe = start_as($gate, $role, effect('probe'), 'probe');
query_until($gate, "SELECT status = 'completed' FROM df.instances WHERE id = '$probe'")
  or die "the probe instance did not complete";
is($gate->safe_psql('postgres', 'SELECT count(*) FROM df_internal.tasks'),
	$ntasks, 'the tasks of instances without a runs row were left alone');
ok(restore($gate, '-L', $last), 'then restore the runs rows');
finish_and_check($gate, 'runs restored last', 8);
$gate->stop('fast');

done_testing();

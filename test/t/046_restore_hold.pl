# A restore never runs a workflow early (docs/design/restores.md): the
# rows a restore loads into df.instances, df_internal.runs and
# df_internal.tasks hold the workers of the database until
# df.resume_restored().
#
# The source has ten instances asleep and 300 chains under way when it is
# dumped, each step writing into a user table with a GRANT, an index and a
# trigger; a large user table comes before it in the dump, so the restore
# of the engine's tables commits long before the GRANTs arrive, and the
# timers are due by then.  Each form of restore goes into a fresh cluster
# whose roles have other OIDs: pg_restore -d, psql -f of a plain dump,
# pg_restore --single-transaction, a --data-only restore into an
# installation made by a --schema-only one, pg_restore -j 4, and a restore
# into the source cluster itself under a new database name.  After each, the workers are
# seen to hold (the log, df.check()), no step has run and no instance has
# failed; then df.resume_restored(), and every instance completes, each
# effect exactly once, no duplicate id in an engine table, df.check()
# clean.
use strict;
use warnings;
use FindBin;
use lib "$FindBin::RealBin/../perl";
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use IPC::Run;
use PgDurableTest;

my $role = $PgDurableTest::ROLE;
my $src = engine_node('hold_src', 2);
my @seqs = qw(tasks_id_seq signals_id_seq results_seq_seq waits_seq_seq events_id_seq);

# The user's tables: effects gets an index and a trigger (the steps write
# it through its GRANT), and "aaa_bulk", restored before it, slows the
# restore down between the engine's tables and the GRANTs.
$src->safe_psql('postgres', qq{
CREATE INDEX effects_step_idx ON effects (instance_id, step);
CREATE FUNCTION effects_stamp() RETURNS trigger LANGUAGE plpgsql AS
  \$\$ BEGIN NEW.step := lower(NEW.step); RETURN NEW; END \$\$;
CREATE TRIGGER effects_stamp BEFORE INSERT ON effects FOR EACH ROW EXECUTE FUNCTION effects_stamp();
CREATE TABLE aaa_bulk AS SELECT g AS id, repeat('x', 200) AS pad FROM generate_series(1, 300000) g;
});
$src->safe_psql('postgres',
	join('', map { "SELECT setval('df_internal.$_', 100000);" } @seqs));

sub effect
{
	my ($step) = @_;
	return "'INSERT INTO effects (instance_id, step) VALUES (''{sys_instance_id}'', ''$step'')'";
}

# 300 chains, each recorded in "expected"
$src->safe_psql('postgres', qq{
SET ROLE $role;
CREATE TEMP TABLE chains AS
  SELECT df.start(} . effect('c1') . ' ~> ' . effect('c2') . ' ~> df.sleep(20) ~> ' . effect('c3')
	  . qq{) AS id FROM generate_series(1, 300);
RESET ROLE;
INSERT INTO expected SELECT id, s FROM chains, unnest('{c1,c2,c3}'::text[]) s;
});
# then ten sleepers, each recorded in "expected"
for my $i (1 .. 10)
{
	my $id = $src->safe_psql('postgres',
		"SET ROLE $role; SELECT df.start(" . effect('s1') . " ~> df.sleep(21) ~> " . effect('s2') . ");");
	$src->safe_psql('postgres',
		"INSERT INTO expected VALUES ('$id', 's1'), ('$id', 's2')");
}
# dump while the sleepers sleep and the chains are in their timers (of
# 20 s: no instance ends while even a loaded machine dumps)
query_until($src, "SELECT count(*) >= 300 FROM df_internal.tasks WHERE kind = 'timer'")
  or die "the instances did not reach their timers";
my %dump = (
	custom => "$PostgreSQL::Test::Utils::tmp_check/hold.dump",
	plain => "$PostgreSQL::Test::Utils::tmp_check/hold.sql");
my ($out, $err) = ('', '');
ok( IPC::Run::run(
		[ 'pg_dump', '-Fc', '-d', $src->connstr('postgres'), '-f', $dump{custom} ],
		'>', \$out, '2>', \$err),
	'pg_dump -Fc while the instances run');
is($src->safe_psql('postgres', "SELECT count(*) FROM df.instances WHERE status = 'completed'"),
	'0', 'no instance had ended when the dump was taken');
# the plain script of the same dump, as pg_dump -Fp writes it
ok( IPC::Run::run([ 'pg_restore', '-f', $dump{plain}, $dump{custom} ], '>', \$out, '2>', \$err),
	'the plain form of the dump');
my $oid_src = $src->safe_psql('postgres', "SELECT oid FROM pg_roles WHERE rolname = '$role'");
$src->stop('fast');

# A fresh cluster whose role has another OID.
sub target
{
	my ($name) = @_;
	my $node = engine_cluster($name, 2);
	$node->safe_psql('postgres',
		"CREATE ROLE dummy_a; CREATE ROLE dummy_b; CREATE ROLE $role LOGIN;");
	isnt($node->safe_psql('postgres', "SELECT oid FROM pg_roles WHERE rolname = '$role'"),
		$oid_src, "$name: $role has another OID than in the source");
	return $node;
}

sub run_ok
{
	my ($what, @cmd) = @_;
	my ($o, $e) = ('', '');
	my $ok = IPC::Run::run(\@cmd, '>', \$o, '2>', \$e);
	diag $e if $e ne '';
	ok($ok && $e eq '', "$what, without errors");
	return;
}

# The restore is done: the workers hold and nothing ran; resume, and every
# instance finishes as it would have on the original.
sub resume_and_check
{
	my ($node, $what, $offset) = @_;
	wait_engine_ready($node, 2);
	$node->wait_for_log(qr/pg_durable holds the workflows of database "$PgDurableTest::DB"/, $offset);
	my $before = $node->safe_psql($PgDurableTest::DB, 'SELECT count(*) FROM effects');
	is( $node->safe_psql($PgDurableTest::DB,
			"SELECT count(*) FROM df.check() WHERE problem = 'restore_held'"),
		'1', "$what: df.check() reports the hold");
	is( $node->safe_psql($PgDurableTest::DB,
			"SELECT count(*) FROM df.instances WHERE status NOT IN ('pending', 'running')"),
		'0', "$what: no instance ended while held");
	# an executor that found a due timer would have run its step by now:
	# both have looked at least once since the hold (the log above)
	is($node->safe_psql($PgDurableTest::DB, 'SELECT count(*) FROM effects'),
		$before, "$what: no step ran while held");
	is($node->safe_psql($PgDurableTest::DB, 'SELECT df.resume_restored() > 0'),
		't', "$what: df.resume_restored() lets the live instances go on");
	wait_instances_done($node, $what);
	check_effects($node, 310);
	for my $t (qw(tasks signals events))
	{
		is( $node->safe_psql($PgDurableTest::DB,
				"SELECT count(*) - count(DISTINCT id) FROM df_internal.$t"),
			'0', "$what: no duplicate id in df_internal.$t");
	}
	is($node->safe_psql($PgDurableTest::DB, 'SELECT count(*) FROM df.check()'),
		'0', "$what: df.check() is clean");
	check_engine_empty($node);
	$node->stop('fast');
	return;
}

# --- 1. pg_restore -d ---------------------------------------------------------
my $dst = target('hold_custom');
my $offset = -s $dst->logfile;
run_ok('pg_restore -d', 'pg_restore', '-d', $dst->connstr('postgres'), $dump{custom});
resume_and_check($dst, 'pg_restore -d', $offset);

# --- 2. psql -f of a plain dump -----------------------------------------------
$dst = target('hold_plain');
$offset = -s $dst->logfile;
run_ok('psql -f', 'psql', '-X', '-q', '-v', 'ON_ERROR_STOP=1', '-d', $dst->connstr('postgres'),
	'-f', $dump{plain});
resume_and_check($dst, 'psql -f', $offset);

# --- 3. pg_restore --single-transaction ---------------------------------------
$dst = target('hold_single');
$offset = -s $dst->logfile;
run_ok('pg_restore --single-transaction', 'pg_restore', '--single-transaction',
	'-d', $dst->connstr('postgres'), $dump{custom});
resume_and_check($dst, 'pg_restore --single-transaction', $offset);

# --- 4. --data-only into an existing installation -----------------------------
$dst = target('hold_data_only');
run_ok('pg_restore --schema-only', 'pg_restore', '--schema-only',
	'-d', $dst->connstr('postgres'), $dump{custom});
wait_engine_ready($dst, 2);
is($dst->safe_psql('postgres', 'SELECT count(*) FROM df.check()'),
	'0', 'an installation with no restored rows is not held');
$offset = -s $dst->logfile;
run_ok('pg_restore --data-only', 'pg_restore', '--data-only',
	'-d', $dst->connstr('postgres'), $dump{custom});
resume_and_check($dst, 'pg_restore --data-only', $offset);

# --- 5. pg_restore -j 4 ----------------------------------------------------------
# Four jobs load the tables in any order, each in a transaction of its own:
# df.nodes may come before df.instances, and no reference is checked until
# df.resume_restored().
$dst = target('hold_parallel');
$offset = -s $dst->logfile;
run_ok('pg_restore -j 4', 'pg_restore', '-j', '4', '-d', $dst->connstr('postgres'),
	$dump{custom});
resume_and_check($dst, 'pg_restore -j 4', $offset);

# --- 6. a restore that is not complete is not resumed ---------------------------
# The engine's tables without df.instances: df.resume_restored() refuses,
# names what is missing, and the workers stay held.
$dst = target('hold_partial');
$offset = -s $dst->logfile;
my $list = "$PostgreSQL::Test::Utils::tmp_check/partial.list";
IPC::Run::run([ 'pg_restore', '-l', $dump{custom} ], '>', \$out) or die "pg_restore -l failed";
open(my $fh, '>', $list) or die "$list: $!";
print $fh grep { !/TABLE DATA df instances / } split /^/m, $out;
close($fh);
run_ok('pg_restore without df.instances', 'pg_restore', '-L', $list,
	'-d', $dst->connstr('postgres'), $dump{custom});
wait_engine_ready($dst, 2);
$dst->wait_for_log(qr/pg_durable holds the workflows of database "postgres"/, $offset);
my ($rc, $stdout, $stderr) = $dst->psql('postgres', 'SELECT df.resume_restored()');
like($stderr, qr/the restore is not complete: \d+ nodes without their instance/,
	'df.resume_restored() refuses a restore without df.instances and says why');
is($dst->safe_psql('postgres', "SELECT count(*) FROM df.check() WHERE problem = 'restore_held'"),
	'1', 'the workers stay held after the refusal');
$dst->stop('fast');

# --- 7. the same cluster, under a new name --------------------------------------
# The source cluster itself, with the engine moved to the restored copy
# (pg_durable.database): the original database keeps its rows, untouched.
$src->append_conf('postgresql.conf', "pg_durable.database = 'restored'");
$src->start;
$src->safe_psql('postgres', 'CREATE DATABASE restored');
$offset = -s $src->logfile;
run_ok('pg_restore -d restored on the same cluster', 'pg_restore', '-d', $src->connstr('restored'),
	$dump{custom});
{
	local $PgDurableTest::DB = 'restored';
	resume_and_check($src, 'same cluster, new name', $offset);
}

done_testing();

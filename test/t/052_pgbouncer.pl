# pg_durable through PgBouncer in transaction pooling mode
# (docs/operations/high-availability.md, "PgBouncer"): every call is its
# own transaction on whichever server connection the pooler hands out, so
# nothing may depend on a session.  Through a pool of two server
# connections: df.start, df.status, df.await_instance, df.result,
# df.signal, a workflow variable set in one transaction and used by a
# df.start in another, df.start with transaction_mode => 'new', and ten
# clients starting and awaiting at once.  Skipped without pgbouncer.
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

my ($pgbouncer) = grep { -x } map { "$_/pgbouncer" } split(/:/, $ENV{PATH}), '/usr/sbin';
plan skip_all => 'pgbouncer is not installed' unless $pgbouncer;

my $node = engine_node('bouncer', 2);
$node->safe_psql('postgres', "SELECT df.grant_usage('df_user')");
my $port = PostgreSQL::Test::Cluster::get_free_port();
my $dir = $PostgreSQL::Test::Utils::tmp_check;
my $host = $node->host;
my $pgport = $node->port;
open(my $fh, '>', "$dir/userlist.txt") or die $!;
print $fh qq{"df_user" ""\n};
close $fh;
open($fh, '>', "$dir/pgbouncer.ini") or die $!;
print $fh qq{[databases]
postgres = host=$host port=$pgport dbname=postgres

[pgbouncer]
listen_addr = 127.0.0.1
listen_port = $port
unix_socket_dir =
auth_type = trust
auth_file = $dir/userlist.txt
pool_mode = transaction
default_pool_size = 2
max_client_conn = 100
logfile = $PostgreSQL::Test::Utils::log_path/pgbouncer.log
pidfile = $dir/pgbouncer.pid
};
close $fh;
my $bouncer = IPC::Run::start([ $pgbouncer, "$dir/pgbouncer.ini" ],
	'<', \undef, '>', \my $bout, '2>', \my $berr);
END { local $?; $bouncer->kill_kill if $bouncer; }

my @via = ('psql', '-XAtq', '-h', '127.0.0.1', '-p', $port, '-U', 'df_user', '-d', 'postgres');

# Run $sql through the pooler as df_user; returns its output, dies on error.
sub via
{
	my ($sql) = @_;
	my ($out, $err) = ('', '');
	IPC::Run::run([ @via, '-v', 'ON_ERROR_STOP=1', '-c', $sql ], '<', \undef,
		'>', \$out, '2>', \$err)
	  or die "through pgbouncer: $sql: $err";
	chomp $out;
	return $out;
}

my $up = 0;
for (my $i = 0; $i < 100 && !$up; $i++)
{
	$up = eval { via('SELECT 1') eq '1' };
	usleep(100_000) unless $up;
}
ok($up, 'pgbouncer accepts connections');

my $id = via(q{SELECT df.start('SELECT 40 + 2 AS answer')});
like($id, qr/^[0-9a-f]{8}$/, 'df.start through the pooler');
is(via("SELECT df.await_instance('$id', 30)"), 'completed', 'df.await_instance');
is(via("SELECT df.status('$id')"), 'completed', 'df.status');
like(via("SELECT df.result('$id')"), qr/"answer": 42/, 'df.result');

my $waiting = via(q{SELECT df.start(df.wait_for_signal('go') |=> 'sig')});
ok( query_until($node,
		"SELECT EXISTS (SELECT FROM df_internal.waits WHERE instance_id = '$waiting')"),
	'an instance waits for a signal');
like(via(qq{SELECT df.signal('$waiting', 'go', '{"v": 7}')}), qr/./, 'df.signal through the pooler');
is(via("SELECT df.await_instance('$waiting', 30)"), 'completed', 'the signal was delivered');

# a variable is a row of df.vars, not session state
via(q{SELECT df.setvar('greeting', 'hello')});
my $v = via(q{SELECT df.start('SELECT ''{greeting}'' AS g')});
is(via("SELECT df.await_instance('$v', 30)"), 'completed', 'a workflow using a variable');
like(via("SELECT df.result('$v')"), qr/"g": "hello"/,
	'the variable set in another transaction was used');

my $new = via(q{SELECT df.start('SELECT 1 AS one', transaction_mode => 'new')});
is(via("SELECT df.await_instance('$new', 30)"), 'completed', "transaction_mode => 'new'");

# ten clients at once over two server connections
my @h;
for my $c (1 .. 10)
{
	my $file = "$dir/client_$c.sql";
	open(my $f, '>', $file) or die "$file: $!";
	# the start and the wait in two transactions, on any server connection
	print $f map {
		"SELECT df.start('SELECT $c * $_ AS n') AS id \\gset\n"
		  . "SELECT df.await_instance(:'id', 30);\n"
	} 1 .. 5;
	close $f;
	my ($out, $err) = ('', '');
	push @h, [ IPC::Run::start([ @via, '-v', 'ON_ERROR_STOP=1', '-f', $file ], '<', \undef,
			'>', \$out, '2>', \$err), \$out, \$err ];
}
my $completed = 0;
for my $x (@h)
{
	$x->[0]->finish or diag "a client failed: ${ $x->[2] }";
	$completed += () = ${ $x->[1] } =~ /^completed$/mg;
}
is($completed, 50, 'ten clients started and awaited 50 instances through two server connections');

check_df_clean($node, 'the calls through pgbouncer');
$node->stop('fast');
done_testing();

/*
 * pg_durable upgrade script, 0.3.0 -> 0.4.0.
 *
 * Every change to the schema of sql/pg_durable.sql since 0.3.0 (tables,
 * columns, constraints, functions, operators, grants, comments) is repeated
 * here, so that ALTER EXTENSION pg_durable UPDATE gives a database that is
 * the same as a fresh CREATE EXTENSION.  test/t/020_upgrade.pl compares the
 * two and fails when they differ.
 */

\echo Use "ALTER EXTENSION pg_durable UPDATE TO '0.4.0'" to load this file. \quit

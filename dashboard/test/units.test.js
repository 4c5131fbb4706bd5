/*
 * units.test.js
 *	  The dashboard's pure parts, without a server: an instance's graph
 *	  rebuilt from its node rows, the timeline's queue wait and run time, why
 *	  an instance waits, the list's label pattern and cursor.
 */
'use strict';

const { test } = require('node:test');
const assert = require('node:assert/strict');
const { rebuildGraph } = require('../lib/graph');
const { layoutTimeline } = require('../lib/timeline');
const { whyWaiting } = require('../lib/waits');
const { likePattern, decodeCursor } = require('../lib/queries');

const row = (node_id, node_type, extra = {}) => ({ node_id, node_type, query: null, result_name: null,
	left_node: null, right_node: null, ...extra });

test('a persisted IF, JOIN of three and LOOP nest their linked nodes again', () => {
	const rows = [
		row('00000001', 'THEN', { left_node: '00000002', right_node: '00000006' }),
		row('00000002', 'IF', { query: '{"condition_node":"00000003"}', left_node: '00000004', right_node: '00000005' }),
		row('00000003', 'SQL', { query: 'SELECT true' }),
		row('00000004', 'SQL', { query: 'SELECT 1', result_name: 'one' }),
		row('00000005', 'SQL', { query: 'SELECT 2' }),
		row('00000006', 'JOIN', { query: '{"extra_nodes":["00000009"]}', left_node: '00000007', right_node: '00000008' }),
		row('00000007', 'LOOP', { query: '{"condition_node":"0000000a"}', left_node: '0000000b' }),
		row('00000008', 'RETRY', { query: '{}', left_node: '0000000c' }),
		row('00000009', 'SLEEP', { query: '5' }),
		row('0000000a', 'SQL', { query: 'SELECT false' }),
		row('0000000b', 'SQL', { query: 'SELECT 3' }),
		row('0000000c', 'SQL', { query: 'SELECT 4' }),
	];
	assert.deepEqual(rebuildGraph(rows, '00000001'), {
		node_type: 'THEN',
		left_node: {
			node_type: 'IF',
			condition_node: { node_type: 'SQL', query: 'SELECT true' },
			left_node: { node_type: 'SQL', query: 'SELECT 1', result_name: 'one' },
			right_node: { node_type: 'SQL', query: 'SELECT 2' },
		},
		right_node: {
			node_type: 'JOIN',
			extra_nodes: [{ node_type: 'SLEEP', query: '5' }],
			left_node: { node_type: 'LOOP', condition_node: { node_type: 'SQL', query: 'SELECT false' },
				left_node: { node_type: 'SQL', query: 'SELECT 3' } },
			right_node: { node_type: 'RETRY', query: '{}', left_node: { node_type: 'SQL', query: 'SELECT 4' } },
		},
	});
	assert.throws(() => rebuildGraph(rows, 'ffffffff'), /not visible/);
	assert.throws(() => rebuildGraph([row('00000001', 'THEN', { left_node: '00000001' })], '00000001'), /twice/);
});

test('the timeline: a sequence\'s second step waits from the first one\'s end', () => {
	const at = (ms) => new Date(Date.UTC(2026, 0, 1) + ms).toISOString();
	const spans = [
		{ span_id: 'w', parent_span_id: null, name: 'workflow', start_time: at(10), end_time: at(100), status: 'OK', attributes: {} },
		{ span_id: 't', parent_span_id: 'w', name: 'THEN', start_time: at(10), end_time: at(100), status: 'OK',
			attributes: { 'pg_durable.node_type': 'THEN' } },
		{ span_id: 'a', parent_span_id: 't', name: 'SQL a', start_time: at(10), end_time: at(30), status: 'OK', attributes: {} },
		{ span_id: 'b', parent_span_id: 't', name: 'SQL b', start_time: at(50), end_time: at(100), status: 'ERROR', attributes: {} },
	];
	const { rows, totalMs } = layoutTimeline(at(0), spans);
	assert.equal(totalMs, 100);
	assert.deepEqual(rows.map((r) => [r.name, r.depth, r.waitMs, r.runMs, r.status]), [
		['workflow', 0, 10, 90, 'OK'],
		['THEN', 1, 0, 90, 'OK'],
		['SQL a', 2, 0, 20, 'OK'],
		['SQL b', 2, 20, 50, 'ERROR'],
	]);
	const running = layoutTimeline(at(0), [{ ...spans[0], end_time: null }], new Date(Date.UTC(2026, 0, 1) + 40));
	assert.equal(running.rows[0].status, 'RUNNING');
	assert.equal(running.rows[0].runMs, 30);
	assert.deepEqual(layoutTimeline(at(0), []), { rows: [], totalMs: 0 });
});

test('why it waits', () => {
	assert.match(whyWaiting({ status: 'pending' }, [], [], [])[0].text, /queued: waiting for an executor/);
	const waits = whyWaiting({ status: 'running' }, [
		{ node_id: 'n1', node_type: 'SIGNAL', query: '{"signal_name":"approve","timeout_seconds":60}' },
		{ node_id: 'n2', node_type: 'SLEEP', query: '30', updated_at: '2026-01-01T00:00:00Z' },
		{ node_id: 'n3', node_type: 'THEN', query: null },
	], [{ node_id: 'n4', key: 'orders:1', waiters: 2 }], [{ node_id: 'n5', key: 'pay', position: 3 }]).map((w) => w.text);
	assert.deepEqual(waits, [
		'waiting for lock "orders:1" (2 waiters)',
		'queued on limit "pay", position 3',
		'waiting for signal "approve" (times out after 60 s)',
		'timer: sleeping 30 s, due about 2026-01-01T00:00:30.000Z',
	]);
	// what the node recorded when it began to wait wins over the estimate
	assert.deepEqual(whyWaiting({ status: 'running' }, [
		{ node_id: 'n1', node_type: 'SLEEP', query: '30', updated_at: '2026-01-01T00:00:00Z',
			status_details: '{"waiting_on": "timer", "due_at": "2026-01-01 00:00:31+00"}' },
		{ node_id: 'n2', node_type: 'EVENT', query: '{"topic":"orders","filter":{"a":1},"timeout_seconds":60}',
			status_details: { waiting_on: 'event', topic: 'orders', filter: { a: 1 }, deadline: '2026-01-01 00:01:00+00' } },
	], [], []).map((w) => w.text), [
		'timer: sleeping 30 s, due 2026-01-01T00:00:31.000Z',
		'waiting for an event on topic "orders" matching {"a":1} (times out at 2026-01-01T00:01:00.000Z)',
	]);
	assert.deepEqual(whyWaiting({ status: 'running' }, [], [], []).map((w) => w.text), ['running']);
});

test('label patterns and cursors', () => {
	assert.equal(likePattern('nightly'), '%nightly%');
	assert.equal(likePattern('a_b\\c'), '%a\\_b\\\\c%');
	assert.equal(likePattern('night%'), 'night%');
	assert.deepEqual(decodeCursor('1764000000000000.0a1b2c3d'), { micros: '1764000000000000', id: '0a1b2c3d' });
	assert.equal(decodeCursor('1.2'), null);
	assert.equal(decodeCursor("1.0a1b2c3d'; DROP TABLE x"), null);
	assert.equal(decodeCursor(null), null);
});

/*
 * waits.js
 *	  Why a live instance waits, in words, from what it is doing now: its
 *	  running nodes (df.nodes, with what a waiting node recorded in its
 *	  status_details: its due time or deadline), the lock keys it waits for
 *	  (df.locks) and its places in limit queues (df.limit_queue).  A pending instance waits for
 *	  an executor to start it.  Pure: no statement of its own.
 */
'use strict';

function parseJson(text) {
	try {
		return JSON.parse(text);
	} catch (e) {
		return null;
	}
}

// a node's status_details, as JSON text (df.instance_nodes) or an object (df.nodes)
function details(n) {
	if (n.status_details == null)
		return {};
	return (typeof n.status_details === 'string' ? parseJson(n.status_details) : n.status_details) || {};
}

function iso(text) {
	const d = new Date(text);
	return isNaN(d.getTime()) ? text : d.toISOString();
}

function plusSeconds(date, seconds) {
	return new Date(new Date(date).getTime() + seconds * 1000);
}

// one line per running node worth naming; wrappers whose child runs say nothing
function whyWaiting(instance, running, lockWaits, limitQueue) {
	const out = [];
	if (instance.status === 'pending') {
		out.push({ kind: 'queued', text: 'queued: waiting for an executor to start it' });
		return out;
	}
	for (const l of lockWaits)
		out.push({ kind: 'lock', node_id: l.node_id,
			text: `waiting for lock "${l.key}" (${l.waiters} waiter${Number(l.waiters) === 1 ? '' : 's'})` });
	for (const q of limitQueue)
		out.push({ kind: 'limit', node_id: q.node_id,
			text: `queued on limit "${q.key}", position ${q.position}` + (q.deadline ? `, until ${new Date(q.deadline).toISOString()}` : '') });
	for (const n of running) {
		const cfg = parseJson(n.query) || {};
		// what the node recorded when it began to wait (waiting_on, due_at, deadline)
		const d = details(n);
		const timesOut = d.deadline ? ` (times out at ${iso(d.deadline)})`
			: cfg.timeout_seconds ? ` (times out after ${cfg.timeout_seconds} s)` : '';
		switch (n.node_type) {
		case 'SLEEP': {
			const s = Number(n.query);
			out.push({ kind: 'timer', node_id: n.node_id,
				text: `timer: sleeping ${s} s` + (d.due_at ? `, due ${iso(d.due_at)}`
					: n.updated_at && isFinite(s) ? `, due about ${plusSeconds(n.updated_at, s).toISOString()}` : '') });
			break;
		}
		case 'WAIT_SCHEDULE':
			out.push({ kind: 'timer', node_id: n.node_id,
				text: `timer: waiting for the cron schedule "${cfg.cron_expr || n.query}"` + (d.due_at ? `, next at ${iso(d.due_at)}` : '') });
			break;
		case 'SIGNAL':
			out.push({ kind: 'signal', node_id: n.node_id,
				text: `waiting for signal "${cfg.signal_name}"` + timesOut });
			break;
		case 'EVENT':
			out.push({ kind: 'event', node_id: n.node_id,
				text: `waiting for an event on topic "${cfg.topic}"` + (d.filter ? ` matching ${JSON.stringify(d.filter)}` : '') + timesOut });
			break;
		case 'HTTP':
		case 'HTTP_MULTIPART':
			out.push({ kind: 'http', node_id: n.node_id, text: 'HTTP call in flight (or waiting for its retry)' });
			break;
		case 'SQL':
			out.push({ kind: 'step', node_id: n.node_id, text: 'running a SQL step (or waiting for an executor or its retry)' });
			break;
		default:
			break;
		}
	}
	if (out.length === 0)
		out.push({ kind: 'running', text: 'running' });
	return out;
}

module.exports = { whyWaiting };

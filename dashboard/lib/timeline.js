/*
 * timeline.js
 *	  The Gantt chart of an instance from its spans (df.instance_spans, which
 *	  derives them from the history): one bar per node execution and per
 *	  attempt of a step, in tree order.  Each bar has two parts: the queue
 *	  wait, from the moment the span could have started to the moment it
 *	  did, and the run time, from its start to its end (or to now while it
 *	  runs).  A span could start when its parent started, or, under a THEN
 *	  (a sequence), when the sibling before it ended, or, for an attempt,
 *	  when the attempt before it ended (its back-off is part of its wait);
 *	  the instance could start when df.start created it.  Pure.
 */
'use strict';

function layoutTimeline(createdAt, spans, now) {
	if (spans.length === 0)
		return { rows: [], totalMs: 0 };
	const t = (d) => (d ? new Date(d).getTime() : null);
	const nowMs = t(now || new Date());
	const byParent = new Map();
	for (const s of spans) {
		const k = s.parent_span_id || '';
		if (!byParent.has(k))
			byParent.set(k, []);
		byParent.get(k).push(s);
	}
	const ids = new Set(spans.map((s) => s.span_id));
	const roots = spans.filter((s) => !s.parent_span_id || !ids.has(s.parent_span_id));
	const origin = Math.min(t(createdAt) || Infinity, ...spans.map((s) => t(s.start_time)));
	const rows = [];

	function visit(span, depth, readyAt) {
		const start = t(span.start_time);
		const end = t(span.end_time) ?? nowMs;
		const attrs = span.attributes || {};
		rows.push({
			depth,
			name: span.name,
			kind: span.kind,
			status: span.end_time ? span.status : 'RUNNING',
			node_id: attrs['pg_durable.node_id'] || null,
			node_type: attrs['pg_durable.node_type'] || null,
			readyMs: Math.min(readyAt, start) - origin,
			startMs: start - origin,
			endMs: end - origin,
			waitMs: Math.max(0, start - readyAt),
			runMs: Math.max(0, end - start),
		});
		const children = (byParent.get(span.span_id) || []).slice()
			.sort((a, b) => t(a.start_time) - t(b.start_time));
		const sequential = attrs['pg_durable.node_type'] === 'THEN' || children.every((c) => c.name.startsWith('attempt'));
		let prevEnd = start;
		for (const c of children) {
			visit(c, depth + 1, sequential ? prevEnd : start);
			prevEnd = t(c.end_time) ?? nowMs;
		}
	}
	for (const r of roots)
		visit(r, 0, r.parent_span_id ? t(r.start_time) : (t(createdAt) ?? t(r.start_time)));
	const totalMs = Math.max(1, ...rows.map((r) => r.endMs));
	return { rows, totalMs };
}

module.exports = { layoutTimeline };

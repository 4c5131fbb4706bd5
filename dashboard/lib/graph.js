/*
 * graph.js
 *	  The workflow graph of an instance again, as the JSON text df.start takes,
 *	  made from its nodes as df.instance_nodes returns them: each node's
 *	  node_type, query, result_name, left_node and right_node, nested from the
 *	  instance's root.  A persisted IF or LOOP keeps its condition's id in its
 *	  query ({"condition_node": id}) and a JOIN of three its third branch's
 *	  ({"extra_nodes": [id]}); in the JSON they are nested nodes again
 *	  ("condition_node", "extra_nodes"), as df.if, df.loop and df.join3 make
 *	  them.  df.start validates the result as it validates any graph.
 */
'use strict';

const LINKED_IN_QUERY = new Set(['IF', 'LOOP', 'JOIN']);

function rebuildGraph(nodeRows, rootId) {
	const byId = new Map(nodeRows.map((n) => [n.node_id, n]));
	const seen = new Set();

	function build(id) {
		const n = byId.get(id);
		if (!n)
			throw Object.assign(new Error(`node ${id} of the graph is not visible`), { status: 409 });
		if (seen.has(id))
			throw Object.assign(new Error(`node ${id} appears twice in the graph`), { status: 409 });
		seen.add(id);
		const out = { node_type: n.node_type };
		let query = n.query;
		if (LINKED_IN_QUERY.has(n.node_type) && query) {
			let cfg = null;
			try {
				cfg = JSON.parse(query);
			} catch (e) {
				cfg = null;
			}
			if (cfg && typeof cfg === 'object' && !Array.isArray(cfg)) {
				if (typeof cfg.condition_node === 'string') {
					out.condition_node = build(cfg.condition_node);
					delete cfg.condition_node;
				}
				if (Array.isArray(cfg.extra_nodes)) {
					out.extra_nodes = cfg.extra_nodes.map(build);
					delete cfg.extra_nodes;
				}
				query = Object.keys(cfg).length ? JSON.stringify(cfg) : null;
			}
		}
		if (query !== null && query !== undefined)
			out.query = query;
		if (n.result_name)
			out.result_name = n.result_name;
		if (n.left_node)
			out.left_node = build(n.left_node);
		if (n.right_node)
			out.right_node = build(n.right_node);
		return out;
	}

	return build(rootId);
}

module.exports = { rebuildGraph };

/*
 * svg.js
 *	  The picture of an instance: the Graphviz text of df.explain(id, 'dot')
 *	  drawn by Debian's dot (-Tsvg), then cut down to the SVG elements and
 *	  attributes dot draws with, so that the page can inline it.  dot is run
 *	  with its input on stdin, no shell, and a time limit; df.explain escapes
 *	  labels for dot, dot escapes them for XML, and the allowlist below keeps
 *	  anything else (scripts, event handlers, links, foreign objects) out even
 *	  so.  Each node's group gets a class with its state (dot writes it as the
 *	  tooltip, which df.explain sets to the node's status).
 */
'use strict';

const { execFile } = require('node:child_process');
const sanitizeHtml = require('sanitize-html');

const DOT = process.env.PGD_DASHBOARD_DOT || 'dot';
const STATES = new Set(['completed', 'failed', 'running', 'pending', 'skipped']);

const GEOMETRY = ['fill', 'stroke', 'stroke-width', 'stroke-dasharray', 'transform', 'points', 'd',
	'cx', 'cy', 'rx', 'ry', 'x', 'y', 'width', 'height', 'text-anchor', 'font-family', 'font-size',
	'font-weight', 'font-style', 'fill-opacity', 'stroke-opacity', 'x1', 'x2', 'y1', 'y2'];

const ALLOW = {
	allowedTags: ['svg', 'g', 'title', 'polygon', 'polyline', 'ellipse', 'path', 'text', 'a', 'line', 'rect', 'circle'],
	allowedAttributes: {
		svg: ['width', 'height', 'viewBox', 'xmlns', 'xmlns:xlink', 'role', 'aria-label', 'class'],
		g: ['id', 'class', ...GEOMETRY],
		a: ['xlink:title', 'class'],
		'*': GEOMETRY,
	},
	allowedSchemes: [],
	parser: { xmlMode: true, lowerCaseTags: false, lowerCaseAttributeNames: false },
	exclusiveFilter: null,
	transformTags: {
		a: (tagName, attribs) => {
			const state = attribs['xlink:title'];
			return { tagName: 'a', attribs: { 'xlink:title': state, class: STATES.has(state) ? `state-${state}` : 'state' } };
		},
	},
};

function runDot(dotText) {
	return new Promise((resolve, reject) => {
		const child = execFile(DOT, ['-Tsvg'], { timeout: 10000, maxBuffer: 32 * 1024 * 1024 },
			(err, stdout, stderr) => (err ? reject(new Error(`dot failed: ${stderr || err.message}`)) : resolve(stdout)));
		child.stdin.on('error', () => {});
		child.stdin.end(dotText);
	});
}

async function dotToSvg(dotText) {
	const raw = await runDot(dotText);
	const start = raw.indexOf('<svg');
	const clean = sanitizeHtml(start >= 0 ? raw.slice(start) : raw, ALLOW);
	return clean.replace('<svg', '<svg class="graph" role="img" aria-label="workflow graph"');
}

module.exports = { dotToSvg };

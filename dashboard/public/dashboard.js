/*
 * dashboard.js
 *	  Auto-refresh of the live parts of a page: every few seconds, while the
 *	  tab is visible and the user has not paused it, the page is fetched
 *	  again and each element marked data-live takes the new content of its
 *	  namesake.  An element marked data-fragment is filled from its URL (a
 *	  piece of HTML: the counts by status, which may take longer than the
 *	  list) when the page loads and at each refresh.  The HTML comes from
 *	  this server, escaped there; DOMParser runs no script.  The pause is
 *	  remembered per page kind.
 */
'use strict';

async function loadFragments() {
	await Promise.all(Array.from(document.querySelectorAll('[data-fragment]')).map(async (el) => {
		const res = await fetch(el.dataset.fragment, { credentials: 'same-origin', headers: { Accept: 'text/html' } });
		if (!res.ok)
			return;
		const doc = new DOMParser().parseFromString(`<div>${await res.text()}</div>`, 'text/html');
		el.replaceChildren(...Array.from(doc.body.firstChild.childNodes).map((n) => document.importNode(n, true)));
		el.dataset.loaded = '1';
	}));
}

loadFragments().catch(() => {});

(function () {
	const button = document.getElementById('refresh-toggle');
	if (!button)
		return;
	const seconds = Number(button.dataset.refreshSeconds) || 5;
	const state = document.getElementById('refresh-state');
	const key = 'pgd-refresh-paused:' + location.pathname.split('/')[1];
	let paused = localStorage.getItem(key) === '1';
	let busy = false;

	function show() {
		button.textContent = paused ? 'Resume auto-refresh' : 'Pause auto-refresh';
		button.setAttribute('aria-pressed', paused ? 'true' : 'false');
		state.textContent = paused ? 'auto-refresh paused' : `refreshing every ${seconds} s`;
		document.body.dataset.refresh = paused ? 'paused' : 'on';
	}

	async function refresh() {
		if (paused || busy || document.hidden)
			return;
		busy = true;
		try {
			const res = await fetch(location.href, { credentials: 'same-origin', headers: { Accept: 'text/html' } });
			if (!res.ok)
				return;
			const doc = new DOMParser().parseFromString(await res.text(), 'text/html');
			for (const el of document.querySelectorAll('[data-live]')) {
				const fresh = doc.querySelector(`[data-live="${el.dataset.live}"]`);
				if (fresh)
					el.replaceChildren(...Array.from(fresh.childNodes).map((n) => document.importNode(n, true)));
			}
			await loadFragments();
			document.body.dataset.refreshedAt = String(Date.now());
		} catch (e) {
			state.textContent = 'refresh failed; retrying';
		} finally {
			busy = false;
		}
	}

	button.addEventListener('click', () => {
		paused = !paused;
		localStorage.setItem(key, paused ? '1' : '0');
		show();
	});
	show();
	setInterval(refresh, seconds * 1000);
})();

/*
 * browser.test.js
 *	  The dashboard in a real browser: Debian's chromium, headless, driven by
 *	  puppeteer-core (which downloads no browser).  The list shows instances
 *	  just started; an instance page shows its graph with the failed node
 *	  marked and its timeline; a label that is markup shows as text and runs
 *	  nothing; cancelling from the page cancels the instance; --login refuses
 *	  a wrong password.  A screenshot of each page goes to
 *	  $PGD_TEST_SCREENSHOTS.  Every wait is puppeteer's, on a condition, with
 *	  a deadline.
 */
'use strict';

const { test, before, after } = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const path = require('node:path');
const puppeteer = require('puppeteer-core');
const h = require('./helpers');

const CHROMIUM = process.env.PGD_CHROMIUM || ['/usr/bin/chromium', '/usr/bin/chromium-browser'].find((p) => fs.existsSync(p));
const SHOTS = process.env.PGD_TEST_SCREENSHOTS || path.join(__dirname, '..', '..', 'build', 'dashboard-screenshots');
const XSS = '<img src=x onerror=alert(1)>';

let admin, carol, dave;
let dash, dashLogin, browser;
const ids = {};
const dialogs = [];

before(async () => {
	assert.ok(CHROMIUM, 'chromium is installed (scripts/install-deps installs Debian\'s chromium)');
	fs.mkdirSync(SHOTS, { recursive: true });
	admin = h.superPool();
	carol = await h.makeRole(admin, 'web_carol', 'carol secret');
	dave = await h.makeRole(admin, 'web_dave', 'dave secret');
	ids.ok = await h.start(carol, "('SELECT 1 AS a' & 'SELECT 2 AS b') ~> ('SELECT pg_sleep(0.05), 3 AS c' |=> 'c')", 'nightly report');
	ids.fail = await h.start(carol, "'SELECT 1 AS a' ~> ('SELECT 2 AS b' & 'SELECT 1/0 AS oops') ~> 'SELECT 3'", 'fails in a branch');
	ids.xss = await h.start(carol, "df.wait_for_signal('never')", XSS);
	ids.dave = await h.start(dave, "'SELECT 1'", 'dave only');
	ids.lock = await h.start(carol, "df.with_lock(df.wait_for_signal('done'), ARRAY['orders:42'])", 'holds a lock');
	ids.limit = await h.start(carol, "df.limit(df.wait_for_signal('done'), 'payments', 2)", 'inside a limit');
	await h.waitStatus(admin, ids.ok, 'completed');
	await h.waitStatus(admin, ids.fail, 'failed');
	await h.waitRunning(admin, ids.xss, 'SIGNAL');
	[dash, dashLogin] = await Promise.all([
		h.startDashboard(['--db', h.tcpUrl('web_carol', 'carol secret')]),
		h.startDashboard(['--db', h.SERVER_URL, '--login']),
	]);
	browser = await puppeteer.launch({
		executablePath: CHROMIUM,
		headless: true,
		args: ['--no-sandbox', '--disable-gpu', '--disable-dev-shm-usage', '--no-first-run'],
	});
});

after(async () => {
	if (browser)
		await browser.close();
	await Promise.all([dash, dashLogin].filter(Boolean).map((d) => d.stop()));
	await Promise.all([carol, dave, admin].filter(Boolean).map((p) => p.end()));
});

async function newPage() {
	const page = await browser.newPage();
	await page.setViewport({ width: 1280, height: 900 });
	page.on('dialog', async (d) => {
		dialogs.push(d.message());
		await d.dismiss();
	});
	page.setDefaultTimeout(20000);
	return page;
}

const shot = (page, name) => page.screenshot({ path: path.join(SHOTS, `${name}.png`), fullPage: true });

test('the list shows the instances just started, and new ones as they start', async () => {
	const page = await newPage();
	await page.goto(`${dash.url}/instances`);
	for (const id of [ids.ok, ids.fail, ids.xss])
		await page.waitForSelector(`tr[data-id="${id}"]`);
	assert.equal(await page.$(`tr[data-id="${ids.dave}"]`), null, 'another role\'s instance is not listed');
	assert.equal(await page.$eval(`tr[data-id="${ids.fail}"] .status`, (e) => e.textContent), 'failed');
	assert.match(await page.$eval(`tr[data-id="${ids.xss}"] .waits`, (e) => e.textContent), /waiting for signal "never"/);
	await page.waitForSelector('#counts[data-loaded="1"] a[data-status="failed"]');
	assert.match(await page.$eval('#counts a[data-status="failed"] .n', (e) => e.textContent), /^[1-9]/);
	await shot(page, 'instances');
	// started after the page loaded: the auto-refresh brings it in
	const fresh = await h.start(carol, "'SELECT 1'", 'started while watching');
	await page.waitForSelector(`tr[data-id="${fresh}"]`, { timeout: 20000 });
	// paused, it stops
	await page.click('#refresh-toggle');
	await page.waitForSelector('body[data-refresh="paused"]');
	assert.equal(await page.$eval('#refresh-toggle', (e) => e.textContent), 'Resume auto-refresh');
	await page.click('#refresh-toggle');
	await page.waitForSelector('body[data-refresh="on"]');
	await page.close();
});

test('an instance page shows the graph with the failed node marked, and the timeline', async () => {
	const page = await newPage();
	const res = await page.goto(`${dash.url}/instances/${ids.fail}`);
	assert.equal(res.status(), 200);
	await page.waitForSelector('#graph svg.graph');
	const failed = await page.$$eval('#graph svg.graph a.state-failed', (els) => els.map((a) => a.textContent.trim()));
	assert.ok(failed.some((t) => t.includes('SELECT 1/0') && t.includes('✗')), `failed nodes: ${JSON.stringify(failed)}`);
	const completed = await page.$$eval('#graph svg.graph a.state-completed', (els) => els.length);
	assert.ok(completed >= 2);
	// the failed node's shape is drawn red (dot's fill, from df.explain's colours)
	const fill = await page.$eval('#graph svg.graph a.state-failed path, #graph svg.graph a.state-failed polygon', (e) => e.getAttribute('fill'));
	assert.equal(fill, 'salmon');
	const bars = await page.$$eval('#timeline g.bar', (els) => els.map((g) => ({ cls: g.getAttribute('class'), name: g.querySelector('text.name').textContent })));
	assert.ok(bars.length >= 4, JSON.stringify(bars));
	assert.ok(bars.some((b) => b.cls.includes('st-error')));
	assert.ok(await page.$$eval('#timeline rect.run', (els) => els.every((r) => Number(r.getAttribute('width')) >= 1)));
	assert.match(await page.$eval('#error', (e) => e.textContent), /division by zero/);
	assert.match(await page.$eval('#trace-id', (e) => e.textContent), /^[0-9a-f]{32}$/);
	await shot(page, 'instance-failed');
	await page.screenshot({ path: path.join(SHOTS, 'instance-failed-top.png') });
	await page.goto(`${dash.url}/instances/${ids.ok}`);
	await page.waitForSelector('#graph svg.graph');
	assert.match(await page.$eval('#result', (e) => e.textContent), /"c": 3/);
	await shot(page, 'instance-completed');
	await page.close();
});

test('a label that is markup appears as text, never as an element', async () => {
	const page = await newPage();
	await page.goto(`${dash.url}/instances`);
	await page.waitForSelector(`tr[data-id="${ids.xss}"]`);
	assert.equal(await page.$eval(`tr[data-id="${ids.xss}"] td.label`, (e) => e.textContent), XSS);
	assert.equal(await page.$$eval('img', (els) => els.length), 0);
	await page.goto(`${dash.url}/instances/${ids.xss}`);
	await page.waitForSelector('#instance-label');
	assert.equal(await page.$eval('#instance-label', (e) => e.textContent), XSS);
	assert.equal(await page.$$eval('img', (els) => els.length), 0);
	// the graph's title has it too, as SVG text
	assert.ok(await page.$$eval('#graph svg text', (els, x) => els.some((t) => t.textContent.includes(x)), XSS));
	await shot(page, 'instance-waiting');
	// one auto-refresh later it is still text
	const before = await page.$eval('body', (b) => b.dataset.refreshedAt || '0');
	await page.waitForFunction((b) => (document.body.dataset.refreshedAt || '0') !== b, { timeout: 20000 }, before);
	assert.equal(await page.$$eval('img', (els) => els.length), 0);
	assert.deepEqual(dialogs, []);
	await page.close();
});

test('cancelling from the page cancels the instance', async () => {
	const id = await h.start(carol, 'df.sleep(600)', 'cancel from the browser');
	await h.waitRunning(admin, id, 'SLEEP');
	const page = await newPage();
	await page.goto(`${dash.url}/instances/${id}`);
	await page.waitForSelector('#cancel-button');
	await page.type('#cancel-form input[name=reason]', ' (browser test)');
	await Promise.all([page.waitForNavigation(), page.click('#cancel-button')]);
	await page.waitForSelector('#flash');
	assert.match(await page.$eval('#flash', (e) => e.textContent), /^cancel: /);
	await h.waitStatus(admin, id, 'cancelled');
	await page.reload();
	assert.equal(await page.$eval('#instance-status', (e) => e.textContent), 'cancelled');
	await shot(page, 'instance-cancelled');
	await page.close();
});

test('the coordination and overview pages', async () => {
	const page = await newPage();
	await h.waitRunning(admin, ids.lock, 'SIGNAL');
	await h.waitRunning(admin, ids.limit, 'SIGNAL');
	await page.goto(`${dash.url}/coordination`);
	await page.waitForSelector('#breakers');
	assert.match(await page.$eval('#locks', (e) => e.textContent), /orders:42/);
	assert.match(await page.$eval('#limits', (e) => e.textContent), /payments/);
	await shot(page, 'coordination');
	await page.goto(`${dash.url}/`);
	await page.waitForSelector('#throughput');
	assert.match(await page.$eval('#last-hour', (e) => e.textContent), /started/);
	await shot(page, 'overview');
	await page.close();
});

test('--login refuses a wrong password and lets the right one in', async () => {
	const page = await newPage();
	await page.goto(`${dashLogin.url}/instances`);
	await page.waitForSelector('form.login');
	assert.ok(page.url().endsWith('/login'));
	await page.type('input[name=user]', 'web_dave');
	await page.type('input[name=password]', 'not the password');
	const [res] = await Promise.all([page.waitForNavigation(), page.click('form.login button')]);
	assert.equal(res.status(), 401);
	assert.match(await page.$eval('#login-error', (e) => e.textContent), /sign-in refused/);
	await shot(page, 'login-refused');
	await page.$eval('input[name=password]', (e) => { e.value = ''; });
	await page.type('input[name=password]', 'dave secret');
	await Promise.all([page.waitForNavigation(), page.click('form.login button')]);
	await page.goto(`${dashLogin.url}/instances`);
	await page.waitForSelector(`tr[data-id="${ids.dave}"]`);
	assert.equal(await page.$(`tr[data-id="${ids.ok}"]`), null, 'dave sees only his own');
	await page.close();
});

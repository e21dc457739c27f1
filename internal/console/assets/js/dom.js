// DOM helpers. Everything data-derived goes into the page as text nodes or
// attribute values, never as HTML, so nothing a payload or error contains can
// become markup or script.

/**
 * h builds an element: h('a', {href: '#/', class: 'x', onclick: fn}, 'text', child).
 * Attribute values are set as attributes (on* as listeners, booleans as
 * presence); children may be strings, numbers, nodes, arrays, or null.
 */
export function h(tag, attrs = {}, ...children) {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === null || v === undefined || v === false) continue;
    if (k.startsWith('on') && typeof v === 'function') el.addEventListener(k.slice(2), v);
    else if (v === true) el.setAttribute(k, '');
    else el.setAttribute(k, String(v));
  }
  append(el, children);
  return el;
}

function append(el, children) {
  for (const c of children) {
    if (c === null || c === undefined || c === false) continue;
    if (Array.isArray(c)) append(el, c);
    else el.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
}

/**
 * cell marks a table cell's content with a class: cell(node, 'num').
 */
export const cell = (v, cls) => ({cell: true, v, cls});

/**
 * syncRows makes tbody show items, one row per key, touching only cells whose
 * content changed. Rows are not rebuilt on every poll, so a link or button
 * under the pointer survives a refresh and a click is never lost.
 * cellsOf(item) returns the row's cells: nodes, strings, or cell(v, cls);
 * dataOf(item), if given, returns data-* attributes for the row.
 */
export function syncRows(tbody, items, keyOf, cellsOf, dataOf) {
  const existing = new Map([...tbody.rows].map(tr => [tr.dataset.key, tr]));
  let pos = 0;
  for (const item of items) {
    const key = String(keyOf(item));
    let tr = existing.get(key);
    if (tr) existing.delete(key);
    else tr = h('tr', {'data-key': key});
    const cells = cellsOf(item);
    cells.forEach((c, i) => {
      const {v, cls} = c && c.cell ? c : {v: c, cls: ''};
      const node = v instanceof Node ? v : document.createTextNode(v === null || v === undefined ? '' : String(v));
      const sig = (cls || '') + '|' + (node.nodeType === Node.TEXT_NODE ? node.textContent : node.outerHTML);
      const td = tr.cells[i] || tr.insertCell(-1);
      if (td.dataset.sig !== sig) {
        td.replaceChildren(node);
        td.className = cls || '';
        td.dataset.sig = sig;
      }
    });
    while (tr.cells.length > cells.length) tr.deleteCell(-1);
    if (dataOf) Object.assign(tr.dataset, dataOf(item));
    if (tbody.rows[pos] !== tr) tbody.insertBefore(tr, tbody.rows[pos] || null);
    pos++;
  }
  for (const tr of existing.values()) tr.remove();
}

/** setText changes an element's text only when it differs. */
export function setText(el, text) {
  text = String(text);
  if (el.textContent !== text) el.textContent = text;
}

// ---- formatting ----

const pad = (n, w = 2) => String(n).padStart(w, '0');

/** fmtTime renders an ISO time as local HH:MM:SS.mmm, with the date when not today. */
export function fmtTime(iso, {ms = true} = {}) {
  if (!iso) return '—';
  const d = new Date(iso);
  if (Number.isNaN(d.getTime())) return iso;
  const t = `${pad(d.getHours())}:${pad(d.getMinutes())}:${pad(d.getSeconds())}${ms ? '.' + pad(d.getMilliseconds(), 3) : ''}`;
  const now = new Date();
  if (d.toDateString() === now.toDateString()) return t;
  return `${d.getFullYear()}-${pad(d.getMonth() + 1)}-${pad(d.getDate())} ${t}`;
}

/** fmtDur renders milliseconds for people: 850ms, 1.4s, 2m 05s, 3h 07m, 2d 04h. */
export function fmtDur(ms) {
  if (ms < 1000) return `${Math.max(0, Math.round(ms))}ms`;
  const s = ms / 1000;
  if (s < 60) return `${s.toFixed(1)}s`;
  const m = Math.floor(s / 60);
  if (m < 60) return `${m}m ${pad(Math.floor(s % 60))}s`;
  const hr = Math.floor(m / 60);
  if (hr < 48) return `${hr}h ${pad(m % 60)}m`;
  return `${Math.floor(hr / 24)}d ${pad(hr % 24)}h`;
}

/** fmtSeconds renders an API duration (seconds, fractional). */
export const fmtSeconds = s => fmtDur(s * 1000);

/** shortId keeps a job id readable in tables: job_01m8…k5saag3_demo → …saag3. */
export function shortId(id) {
  const m = /^job_([0-9a-z]{26})_/.exec(id || '');
  return m ? `job_…${m[1].slice(-8)}` : id;
}

// ---- links, badges, countdowns ----

export const queueHref = name => `#/queues/${encodeURIComponent(name)}`;
export const deadHref = name => `#/queues/${encodeURIComponent(name)}/dead`;
export const jobHref = id => `#/jobs/${encodeURIComponent(id)}`;

export function jobLink(id, {short = true} = {}) {
  if (!id) return '—';
  return h('a', {href: jobHref(id), class: 'mono', title: id}, short ? shortId(id) : id);
}

/** badge renders a small colored label; tone is one of the CSS tones. */
export const badge = (text, tone = 'neutral', title) => h('span', {class: `badge ${tone}`, title}, text);

/**
 * countdown renders a live "1.4s" to a release time; the page ticker updates
 * its text several times a second between polls. The release time is on
 * Redis' clock and the countdown on the browser's: with clocks apart, it is
 * off by as much, and the next poll shows the real state either way.
 */
export function countdown(untilIso) {
  const el = h('span', {class: 'countdown', 'data-until': untilIso});
  tickOne(el, Date.now());
  return el;
}

function tickOne(el, now) {
  const until = Date.parse(el.dataset.until);
  if (Number.isNaN(until)) return;
  const left = until - now;
  setText(el, left > 0 ? fmtDur(left) : 'releasing…');
}

setInterval(() => {
  const now = Date.now();
  for (const el of document.querySelectorAll('[data-until]')) tickOne(el, now);
}, 200);

/**
 * holdState renders a queue's hold: open, held (countdown to the release
 * time), probing (the probe's job), or paused (reason).
 */
export function holdState(hold) {
  const st = hold.state;
  const wrap = h('span', {class: 'hold', 'data-state': st});
  switch (st) {
    case 'held': {
      // A breaker hold (semantics.md §4b) says so on the badge: the webhook
      // kept failing, which asks for a different fix than a rate limit.
      const breaker = (hold.reason || '').startsWith('breaker:');
      wrap.append(badge(breaker ? 'held by breaker' : 'held', 'held', hold.reason || 'backpressure hold'));
      if (hold.until) wrap.append(h('span', {class: 'muted small'}, ' releases in '), countdown(hold.until));
      if (breaker) wrap.append(h('span', {class: 'muted small hold-reason'}, ' ', hold.reason));
      break;
    }
    case 'probing':
      wrap.append(badge('probing', 'probing', 'one probe job is out; nothing else is delivered until it succeeds'));
      if (hold.probeJobId) wrap.append(h('span', {class: 'muted small'}, ' probe '), h('a', {href: jobHref(hold.probeJobId), class: 'mono small probe-job', title: hold.probeJobId}, shortId(hold.probeJobId)));
      break;
    case 'paused':
      wrap.append(badge('paused', 'paused', 'paused by an operator'));
      if (hold.reason) wrap.append(h('span', {class: 'muted small'}, ' ', hold.reason));
      break;
    default:
      wrap.append(badge(st || 'open', 'open', 'delivering normally'));
  }
  return wrap;
}

export const statusTones = {
  pending: 'neutral', processing: 'probing', awaiting_ack: 'probing', completed: 'open', dead: 'dead',
};

// ---- toasts ----

export function toast(msg, tone = 'info') {
  const box = document.getElementById('toasts');
  const t = h('div', {class: `toast ${tone}`, role: tone === 'error' ? 'alert' : 'status'}, msg);
  box.append(t);
  setTimeout(() => t.classList.add('leaving'), 3500);
  setTimeout(() => t.remove(), 4000);
}

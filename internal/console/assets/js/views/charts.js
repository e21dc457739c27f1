// Live charts of a queue over the last hour, from its fleet-wide statistics
// (GET /v1/queues/{queue}/stats: one-minute buckets on Redis' clock): the
// deliveries per minute by outcome, the 429s, and the periods the queue was
// held. Small inline SVG drawn with DOM calls, no chart library: every value
// goes in as an attribute or a text node.

import {get, q} from '../api.js';
import {h, setText, fmtDur, fmtTime} from '../dom.js';

const SVG = 'http://www.w3.org/2000/svg';
const W = 600;      // viewBox width: one bar slot per minute
const H = 90;       // bar chart height
const STRIP = 18;   // hold strip height

function s(tag, attrs = {}, ...children) {
  const el = document.createElementNS(SVG, tag);
  for (const [k, v] of Object.entries(attrs)) el.setAttribute(k, String(v));
  for (const c of children) el.append(c instanceof Node ? c : document.createTextNode(String(c)));
  return el;
}

const OUTCOMES = [
  ['success', 'succeeded'],
  ['failed', 'failed'],
  ['lost', 'lost'],
  ['deferred', 'deferred (backpressure)'],
];

/**
 * statsPanel returns the charts of queue name, refreshed every 5 s while ctx
 * lives. Its root carries data-ready once the first answer is drawn.
 */
export default function statsPanel(name, ctx) {
  const deliveries = h('div', {class: 'chart', id: 'chart-deliveries'});
  const r429 = h('div', {class: 'chart', id: 'chart-429'});
  const holds = h('div', {class: 'chart', id: 'chart-holds'});
  const summary = h('p', {class: 'muted small', id: 'stats-summary'});
  const legend = h('p', {class: 'legend small'},
    ...OUTCOMES.map(([k, label]) => h('span', {class: `key ${k}`}, label)));
  const root = h('section', {class: 'charts', id: 'charts'},
    h('h2', {}, 'Last hour, fleet-wide'),
    summary,
    h('h3', {}, 'Deliveries per minute'), legend, deliveries,
    h('h3', {}, 'HTTP 429 per minute'), r429,
    h('h3', {}, 'Hold periods'), holds,
    h('p', {class: 'note muted'}, 'Counted by every daemon in Redis, per minute, kept 24 hours (GET /v1/queues/' + name + '/stats).'));

  ctx.poll(async () => {
    const st = await get(`/v1/queues/${q(name)}/stats`);
    if (!ctx.alive) return;
    const t = st.totals;
    setText(summary, `${t.started} deliveries started · ${t.deliveries.success} succeeded · ${t.deliveries.failed} failed · ` +
      `${t.deliveries.lost} lost · ${t.deliveries.deferred} deferred (${t.http429} × 429) · ${t.holds} holds, held ${fmtDur(t.heldSeconds * 1000)} · ` +
      `${t.probes} probes · ${t.dead} dead`);
    deliveries.replaceChildren(stacked(st.buckets, OUTCOMES.map(([k]) => k), b => b.deliveries, 'deliveries'));
    r429.replaceChildren(stacked(st.buckets, ['r429'], b => ({r429: b.http429}), '429s'));
    holds.replaceChildren(holdStrip(st));
    root.dataset.ready = '1';
    root.dataset.started = String(t.started);
    root.dataset.http429 = String(t.http429);
    root.dataset.holds = String(st.holds.length);
  }, 5000);
  return root;
}

// stacked draws one bar per bucket, its parts stacked in keys order.
function stacked(buckets, keys, partsOf, what) {
  const n = Math.max(buckets.length, 1);
  const slot = W / n;
  let max = 0;
  for (const b of buckets) {
    const p = partsOf(b);
    max = Math.max(max, keys.reduce((sum, k) => sum + (p[k] || 0), 0));
  }
  const svg = s('svg', {viewBox: `0 0 ${W} ${H + 14}`, class: 'bars', role: 'img', 'aria-label': `${what} per minute, max ${max}`});
  svg.append(s('line', {x1: 0, y1: H, x2: W, y2: H, class: 'axis'}));
  buckets.forEach((b, i) => {
    const p = partsOf(b);
    let y = H;
    for (const k of keys) {
      const v = p[k] || 0;
      if (!v || !max) continue;
      const hgt = Math.max(1, (v / max) * (H - 4));
      y -= hgt;
      svg.append(s('rect', {x: (i * slot + 0.5).toFixed(1), y: y.toFixed(1), width: Math.max(1, slot - 1).toFixed(1), height: hgt.toFixed(1), class: `bar ${k}`},
        s('title', {}, `${fmtTime(b.start, {ms: false})}: ${v} ${k}`)));
    }
  });
  svg.append(s('text', {x: 2, y: 10, class: 'tick'}, max ? `max ${max}/min` : 'none'));
  axisLabels(svg, buckets);
  return svg;
}

// holdStrip shades the spans the queue was held, from the hold windows
// asked for, across the buckets' range.
function holdStrip(st) {
  const from = Date.parse(st.since);
  const to = Date.parse(st.until);
  const span = Math.max(1, to - from);
  const svg = s('svg', {viewBox: `0 0 ${W} ${STRIP + 14}`, class: 'strip', role: 'img',
    'aria-label': `${st.holds.length} hold period${st.holds.length === 1 ? '' : 's'}`});
  svg.append(s('rect', {x: 0, y: 0, width: W, height: STRIP, class: 'strip-bg'}));
  const now = Date.parse(st.now);
  for (const w of st.holds) {
    const a = Math.max(from, Date.parse(w.from));
    const b = Math.min(to, Date.parse(w.until), now);
    if (b <= a) continue;
    const x = ((a - from) / span) * W;
    const wd = Math.max(2, ((b - a) / span) * W);
    svg.append(s('rect', {x: x.toFixed(1), y: 0, width: wd.toFixed(1), height: STRIP, class: 'held-span'},
      s('title', {}, `held ${fmtTime(w.from)} – ${fmtTime(w.until)} (${fmtDur(Date.parse(w.until) - Date.parse(w.from))})`)));
  }
  if (!st.holds.length) svg.append(s('text', {x: 4, y: 13, class: 'tick'}, 'never held'));
  axisLabels(svg, st.buckets, STRIP);
  return svg;
}

function axisLabels(svg, buckets, base = H) {
  if (!buckets.length) return;
  const y = base + 12;
  svg.append(s('text', {x: 0, y, class: 'tick'}, fmtTime(buckets[0].start, {ms: false}).slice(0, 5)));
  svg.append(s('text', {x: W, y, class: 'tick end'}, 'now'));
}

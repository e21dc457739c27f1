// A queue's lanes (flow keys, keys.md §5) on its page: the held and probing
// lanes with their release time, probe and a Resume button, and the busiest
// lanes. A lane's flow key links to its jobs (GET .../jobs?flowKey=). The
// panel stays hidden on a queue that has no lanes.

import {get, post, q} from '../api.js';
import {h, cell, syncRows, holdState, fmtTime, setText, toast} from '../dom.js';
import {laneJobsHref} from './jobs.js';

// HELD bounds the held and probing lanes listed (one API page each); BUSY
// is how many of the first page of active lanes are shown, busiest first.
const HELD = 50;
const ACTIVE_PAGE = 1000;
const BUSY = 10;

/**
 * lanesPanel returns the lanes of queue name, refreshed every 2 s while ctx
 * lives. Its root carries data-ready once the first answer is drawn.
 */
export default function lanesPanel(name, ctx) {
  const base = `/v1/queues/${q(name)}/keys`;
  const heldBody = h('tbody');
  const busyBody = h('tbody');
  const heldEmpty = h('p', {class: 'empty small', id: 'lanes-held-empty', hidden: true}, 'No lane is held.');
  const busyEmpty = h('p', {class: 'empty small', id: 'lanes-busy-empty', hidden: true}, 'No lane has jobs waiting or in flight.');
  const summary = h('p', {class: 'muted small', id: 'lanes-summary'});
  const root = h('section', {class: 'lanes', id: 'lanes', hidden: true},
    h('h2', {}, 'Lanes (flow keys)'),
    summary,
    h('h3', {}, 'Held lanes'),
    h('table', {class: 'grid', id: 'lanes-held'},
      h('thead', {}, h('tr', {},
        h('th', {}, 'Flow key'), h('th', {}, 'State'), h('th', {class: 'time'}, 'Releases at'), h('th', {}, 'Reason'),
        h('th', {class: 'num'}, 'Pending'), h('th', {}, ''))),
      heldBody),
    heldEmpty,
    h('h3', {}, `Busiest lanes`),
    h('table', {class: 'grid', id: 'lanes-busy'},
      h('thead', {}, h('tr', {},
        h('th', {}, 'Flow key'), h('th', {class: 'num'}, 'Pending'), h('th', {class: 'num'}, 'Processing'),
        h('th', {class: 'num'}, 'Awaiting ack'), h('th', {class: 'num'}, 'Concurrency'), h('th', {class: 'num'}, 'Rate limit'),
        h('th', {class: 'num'}, 'Weight'))),
      busyBody),
    busyEmpty,
    h('p', {class: 'note muted'}, 'Each flow key is a lane with its own limits, hold and probe; a held lane holds only its own jobs. ' +
      'Busiest: the first page of active lanes, by jobs waiting and in flight.'));

  const poller = ctx.poll(async () => {
    const [held, probing, active] = await Promise.all([
      get(`${base}?state=held&limit=${HELD}`),
      get(`${base}?state=probing&limit=${HELD}`),
      get(`${base}?state=active&limit=${ACTIVE_PAGE}`),
    ]);
    if (!ctx.alive) return;
    const holds = [...held.keys, ...probing.keys];
    const busy = active.keys
      .filter(k => k.counts.pending + k.counts.processing + k.counts.awaitingAck > 0)
      .sort((a, b) => (b.counts.pending + b.counts.processing) - (a.counts.pending + a.counts.processing) ||
        (a.flowKey < b.flowKey ? -1 : 1))
      .slice(0, BUSY);
    root.hidden = holds.length === 0 && active.keys.length === 0;
    const n = page => `${page.keys.length}${page.nextCursor ? '+' : ''}`;
    setText(summary, `${n(held)} held · ${n(probing)} probing · ${n(active)} active`);
    heldEmpty.hidden = holds.length > 0;
    busyEmpty.hidden = busy.length > 0;
    syncRows(heldBody, holds, k => k.flowKey, k => [
      laneLink(name, k.flowKey),
      holdState(k.hold),
      cell(k.hold.until ? fmtTime(k.hold.until) : '—', 'time mono'),
      cell(k.hold.reason || '—', 'error-text'),
      cell(k.counts.pending, 'num'),
      k.hold.state === 'held'
        ? h('button', {type: 'button', class: 'small resume-lane', 'data-key': k.flowKey, onclick: ev => resume(ev.currentTarget, k.flowKey)}, 'Resume')
        : '',
    ], k => ({state: k.hold.state}));
    syncRows(busyBody, busy, k => k.flowKey, k => [
      laneLink(name, k.flowKey),
      cell(k.counts.pending, 'num'),
      cell(k.counts.processing, 'num'),
      cell(k.counts.awaitingAck, 'num'),
      cell(k.concurrency || '—', 'num'),
      cell(k.rateLimitMax || '—', 'num'),
      cell(k.weight, 'num'),
    ]);
    root.dataset.ready = '1';
  }, 2000);

  // Resume: a second click within a few seconds confirms; the lane goes to
  // probing and reopens only when its probe succeeds.
  function resume(button, fk) {
    if (button.dataset.confirm !== '1') {
      button.dataset.confirm = '1';
      button.classList.add('confirm');
      setText(button, 'Confirm resume');
      setTimeout(() => {
        button.dataset.confirm = '';
        button.classList.remove('confirm');
        setText(button, 'Resume');
      }, 4000);
      return undefined;
    }
    return ctx.act(async () => {
      button.disabled = true;
      await post(`${base}/${q(fk)}/resume`, {});
      toast(`Hold on lane ${fk} ended early: one probe goes out.`);
      poller.now();
    }).finally(() => { button.disabled = false; });
  }

  return root;
}

function laneLink(name, fk) {
  return h('a', {href: laneJobsHref(name, fk), class: 'lane-key', 'data-key': fk}, h('code', {}, fk));
}

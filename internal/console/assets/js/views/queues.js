// The queue list: every configured queue with live counts and hold state,
// a button to create one over the API, and each API queue's settings link
// (the file's queues are marked: only the file changes them).

import {get} from '../api.js';
import {h, cell, syncRows, holdState, badge, queueHref, deadHref, fmtSeconds, setText} from '../dom.js';
import {newQueueHref, queueSettingsHref} from './queueform.js';

export default function queuesView(root, _params, ctx) {
  document.title = 'Queues · simpleqd';
  const tbody = h('tbody');
  const empty = h('p', {class: 'empty', hidden: true}, 'No queues are configured. Create one with New queue, PUT /v1/queues/{queue}, or under queues: in the configuration file.');
  const summary = h('span', {class: 'muted'});
  root.append(
    h('div', {class: 'page-head'}, h('h1', {}, 'Queues'), summary,
      h('div', {class: 'actions'}, h('a', {href: newQueueHref, class: 'button primary', id: 'new-queue'}, 'New queue'))),
    h('table', {class: 'grid', id: 'queues'},
      h('thead', {}, h('tr', {},
        h('th', {}, 'Queue'), h('th', {}, 'State'),
        h('th', {class: 'num'}, 'Pending'), h('th', {class: 'num', title: 'In flight, or delivered before and waiting for the next delivery (retry backoff, a defer, a hold)'}, 'Processing'),
        h('th', {class: 'num'}, 'Awaiting ack'), h('th', {class: 'num'}, 'Dead'),
        h('th', {}, 'Mode'), h('th', {class: 'num'}, 'Concurrency'), h('th', {}, 'Rate limit'), h('th', {}, 'Source'))),
      tbody),
    empty);

  ctx.poll(async () => {
    const {queues} = await get('/v1/queues');
    if (!ctx.alive) return;
    empty.hidden = queues.length > 0;
    const held = queues.filter(x => x.hold.state !== 'open').length;
    setText(summary, `${queues.length} queue${queues.length === 1 ? '' : 's'}` + (held ? ` · ${held} not open` : '') + ' · live');
    syncRows(tbody, queues, x => x.name, x => [
      h('a', {href: queueHref(x.name), class: 'queue-name'}, x.name),
      holdState(x.hold),
      cell(x.counts.pending, 'num'),
      cell(x.counts.processing, 'num'),
      cell(x.mode === 'ack' ? x.counts.awaitingAck : '—', 'num'),
      cell(x.counts.dead > 0 ? h('a', {href: deadHref(x.name), class: 'dead-count'}, String(x.counts.dead)) : '0', 'num'),
      x.mode,
      cell(x.concurrency, 'num'),
      x.rateLimitMax > 0 ? `${x.rateLimitMax} / ${fmtSeconds(x.rateLimitWindow)}` : 'none',
      x.source === 'file'
        ? badge('file', 'neutral', 'Declared in the configuration file: change it there')
        : h('a', {href: queueSettingsHref(x.name), class: 'queue-settings'}, 'Edit'),
    ], x => ({queue: x.name}));
  }, 1000);
}

// Schedules (runtime.md §4): every schedule the key reaches, or one queue's
// (#/queues/<name>/schedules), with the next and last run, the last job, and
// pause/resume. Creating and deleting stay with the API and the CLI; the
// file's schedules are marked, since only the file changes them.

import {get, post, q} from '../api.js';
import {h, cell, syncRows, badge, jobLink, queueHref, fmtTime, setText, toast} from '../dom.js';

export const schedulesHref = queue => queue ? `#/queues/${encodeURIComponent(queue)}/schedules` : '#/schedules';

export default function schedulesView(root, [queue], ctx) {
  document.title = (queue ? `${queue} schedules` : 'Schedules') + ' · simpleqd';
  const tbody = h('tbody');
  const empty = h('p', {class: 'empty', hidden: true},
    queue ? `No schedule publishes to ${queue}.` : 'No schedules. Create one with POST /v1/schedules, simpleqd schedule create, or schedules: in the configuration file.');
  const summary = h('span', {class: 'muted'});
  const crumbs = queue
    ? h('nav', {class: 'crumbs'}, h('a', {href: '#/'}, 'Queues'), ' / ', h('a', {href: queueHref(queue)}, queue), ' / schedules')
    : h('nav', {class: 'crumbs'}, h('a', {href: '#/'}, 'Queues'), ' / schedules');
  root.append(crumbs,
    h('div', {class: 'page-head'}, h('h1', {}, queue ? `Schedules of ${queue}` : 'Schedules'), summary),
    h('table', {class: 'grid', id: 'schedules'},
      h('thead', {}, h('tr', {},
        h('th', {}, 'Schedule'), h('th', {}, 'Queue'), h('th', {}, 'Cron'), h('th', {}, 'Time zone'),
        h('th', {}, 'State'), h('th', {}, 'Next run'), h('th', {}, 'Last run'), h('th', {}, 'Last job'),
        h('th', {}, 'Source'), h('th', {}, ''))),
      tbody),
    empty);

  const path = queue ? `/v1/schedules?queue=${q(queue)}` : '/v1/schedules';
  const poller = ctx.poll(async () => {
    const {schedules} = await get(path);
    if (!ctx.alive) return;
    empty.hidden = schedules.length > 0;
    const paused = schedules.filter(s => s.paused).length;
    setText(summary, `${schedules.length} schedule${schedules.length === 1 ? '' : 's'}` + (paused ? ` · ${paused} paused` : '') + ' · live');
    syncRows(tbody, schedules, s => s.id, s => [
      h('span', {class: 'schedule-id'}, s.id),
      h('a', {href: queueHref(s.queue)}, s.queue),
      h('code', {}, s.cron),
      s.timezone,
      s.paused ? badge('paused', 'paused') : badge('running', 'ok'),
      s.paused ? '—' : fmtTime(s.nextRunAt),
      s.lastRunAt ? fmtTime(s.lastRunAt) : '—',
      s.lastJobId ? jobLink(s.lastJobId) : '—',
      s.source === 'file' ? badge('file', 'neutral', 'Declared in the configuration file: change it there') : 'api',
      toggle(s),
    ], s => ({schedule: s.id}));
  }, 1000);

  function toggle(s) {
    const b = h('button', {type: 'button', class: s.paused ? 'resume' : 'pause'}, s.paused ? 'Resume' : 'Pause');
    b.addEventListener('click', () => ctx.act(async () => {
      b.disabled = true;
      const verb = s.paused ? 'resume' : 'pause';
      const now = await post(`/v1/schedules/${q(s.id)}/${verb}`, {});
      toast(now.paused ? `Paused ${s.id}: no tick fires until you resume it.` : `Resumed ${s.id}: next run ${fmtTime(now.nextRunAt)}.`);
      poller.now();
    }));
    return b;
  }
}

// A queue's dead-letter list, newest death first, with replay per job and for
// all of them.

import {get, post, q, ApiError} from '../api.js';
import {h, cell, syncRows, badge, jobLink, queueHref, fmtTime, setText, shortId, toast} from '../dom.js';

const PAGE = 50;
const MAX = 1000; // the API's page limit

export default function deadView(root, [name], ctx) {
  document.title = `Dead letters · ${name} · simpleqd`;
  const path = `/v1/queues/${q(name)}`;
  let limit = PAGE;
  const count = h('span', {class: 'muted', id: 'dead-total'});
  const replayAll = h('button', {type: 'button', id: 'replay-all', disabled: true}, 'Replay all');
  const tbody = h('tbody');
  const empty = h('p', {class: 'empty', hidden: true, id: 'dead-empty'}, 'No dead jobs. Jobs that run out of attempts, are nacked as not retryable, or outlive their lifetime land here.');
  const more = h('button', {type: 'button', class: 'link', hidden: true}, 'Show more');
  const truncated = h('p', {class: 'muted', hidden: true}, `Showing the newest ${MAX}; the API (GET ${path}/dead with a cursor) pages through the rest.`);

  const missing = h('p', {class: 'empty', hidden: true}, `No queue named "${name}" is configured on this daemon.`);
  const content = h('div', {});
  root.append(
    h('nav', {class: 'crumbs'}, h('a', {href: '#/'}, 'Queues'), ' / ', h('a', {href: queueHref(name)}, name), ' / Dead letters'),
    missing, content);
  content.append(
    h('div', {class: 'page-head'}, h('h1', {}, 'Dead letters'), count, h('div', {class: 'actions'}, replayAll)),
    h('div', {class: 'tabs'}, h('a', {href: queueHref(name)}, 'Timeline'), h('span', {class: 'tab active'}, 'Dead letters')),
    h('table', {class: 'grid', id: 'dead'},
      h('thead', {}, h('tr', {},
        h('th', {}, 'Job'), h('th', {}, 'Reason'), h('th', {class: 'num'}, 'Attempts'), h('th', {class: 'num'}, 'Defers'),
        h('th', {}, 'Last error'), h('th', {class: 'time'}, 'Died'), h('th', {}, ''))),
      tbody),
    empty, more, truncated);

  // The newest `limit` dead jobs. A page of the API ends at `limit` jobs or
  // at its byte bound (records carry whole payloads), whichever comes first,
  // so this follows nextCursor until it has them all or the list ends.
  async function newestDead() {
    const jobs = [];
    let cursor = null;
    for (let pages = 0; pages < MAX; pages++) {
      const query = `limit=${limit - jobs.length}` + (cursor ? `&cursor=${q(cursor)}` : '');
      const page = await get(`${path}/dead?${query}`);
      jobs.push(...page.jobs);
      cursor = page.nextCursor;
      if (!cursor || jobs.length >= limit) break;
    }
    return {jobs, nextCursor: cursor};
  }

  let total = 0;
  let confirmTimer = null;
  const poller = ctx.poll(async () => {
    let queue, page;
    try {
      [queue, page] = await Promise.all([get(path), newestDead()]);
    } catch (err) {
      if (!(err instanceof ApiError && err.status === 404)) throw err;
      missing.hidden = false;
      content.hidden = true;
      return;
    }
    if (!ctx.alive) return;
    missing.hidden = true;
    content.hidden = false;
    total = queue.counts.dead;
    setText(count, `${total} job${total === 1 ? '' : 's'}`);
    if (!confirmTimer) {
      replayAll.disabled = total === 0;
      setText(replayAll, total ? `Replay all (${total})` : 'Replay all');
    }
    empty.hidden = page.jobs.length > 0;
    more.hidden = !page.nextCursor || limit >= MAX;
    truncated.hidden = !(page.nextCursor && limit >= MAX);
    syncRows(tbody, page.jobs, j => j.id, j => [
      jobLink(j.id),
      badge(j.deadReason || 'dead', 'dead'),
      cell(`${j.attempts}/${j.maxAttempts}`, 'num'),
      cell(j.deferCount, 'num'),
      cell(j.lastError || '—', 'error-text'),
      cell(fmtTime(j.completedAt, {ms: false}), 'time mono'),
      h('button', {type: 'button', class: 'small replay', 'data-job': j.id, onclick: ev => replayOne(ev.currentTarget, j.id)}, 'Replay'),
    ]);
  }, 2000);

  more.addEventListener('click', () => {
    limit = Math.min(MAX, limit + PAGE);
    poller.now();
  });

  function replayOne(button, id) {
    return ctx.act(async () => {
      button.disabled = true;
      const {replayed} = await post(`${path}/dead/replay`, {ids: [id]});
      toast(replayed ? `Replayed ${shortId(id)}: it is pending again.` : `${shortId(id)} is no longer dead.`);
      const tr = button.closest('tr');
      if (tr && replayed) tr.remove();
      poller.now();
    }).finally(() => { button.disabled = false; });
  }

  // Replay all asks for a second click within a few seconds.
  replayAll.addEventListener('click', () => ctx.act(async () => {
    if (!confirmTimer) {
      setText(replayAll, `Click again to replay ${total}`);
      replayAll.classList.add('confirm');
      confirmTimer = setTimeout(resetConfirm, 4000);
      return;
    }
    resetConfirm();
    replayAll.disabled = true;
    const {replayed} = await post(`${path}/dead/replay`, {all: true});
    toast(`Replayed ${replayed} job${replayed === 1 ? '' : 's'}.`);
    poller.now();
  }));

  function resetConfirm() {
    clearTimeout(confirmTimer);
    confirmTimer = null;
    replayAll.classList.remove('confirm');
    setText(replayAll, total ? `Replay all (${total})` : 'Replay all');
  }
}

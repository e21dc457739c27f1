// A queue's jobs by status (GET /v1/queues/{queue}/jobs), or one lane's
// (flowKey=, keys.md §5), a page at a time with the API's cursor, and cancel: one job from its row, or every job of
// the status shown (POST /v1/queues/{queue}/cancel) after a confirmation
// that says how many.

import {get, post, q, ApiError} from '../api.js';
import {h, cell, syncRows, badge, statusTones, jobLink, queueHref, deadHref, fmtTime, setText, shortId, toast, holdState} from '../dom.js';

const PAGE = 50;
export const STATUSES = ['pending', 'processing', 'awaiting_ack', 'completed', 'dead'];
const LABELS = {pending: 'Pending', processing: 'Processing', awaiting_ack: 'Awaiting ack', completed: 'Completed', dead: 'Dead'};
// The statuses a cancel applies to (control.md §1: not terminal).
const CANCELLABLE = new Set(['pending', 'processing', 'awaiting_ack']);
// Queue.counts member of a status; completed jobs have no count.
const COUNT = {pending: 'pending', processing: 'processing', awaiting_ack: 'awaitingAck', dead: 'dead'};

export const jobsHref = (name, status = 'pending') => `#/queues/${encodeURIComponent(name)}/jobs/${status}`;
export const laneJobsHref = (name, flowKey, status = 'pending') =>
  `#/queues/${encodeURIComponent(name)}/keys/${encodeURIComponent(flowKey)}/jobs/${status}`;

// laneJobsView is the jobs of one lane: the queue's jobs view with a flow
// key filter.
export function laneJobsView(root, [name, flowKey, status = 'pending'], ctx) {
  jobsView(root, [name, status], ctx, flowKey);
}

export default function jobsView(root, [name, status = 'pending'], ctx, flowKey = null) {
  if (!STATUSES.includes(status)) status = 'pending';
  const lane = flowKey !== null;
  const hrefOf = s => lane ? laneJobsHref(name, flowKey, s) : jobsHref(name, s);
  document.title = `${LABELS[status]} jobs · ${lane ? `lane ${flowKey} · ` : ''}${name} · simpleqd`;
  const path = `/v1/queues/${q(name)}`;
  const total = h('span', {class: 'muted', id: 'jobs-total'});
  const cancelAll = h('button', {type: 'button', id: 'cancel-all', hidden: !CANCELLABLE.has(status), disabled: true}, 'Cancel all');
  const tbody = h('tbody');
  const empty = h('p', {class: 'empty', hidden: true, id: 'jobs-empty'}, `No ${LABELS[status].toLowerCase()} jobs on this page.`);
  const first = h('button', {type: 'button', class: 'link', id: 'jobs-first', hidden: true}, '« First page');
  const next = h('button', {type: 'button', class: 'link', id: 'jobs-next', hidden: true}, 'Next page »');
  const pageNo = h('span', {class: 'muted small', id: 'jobs-page'});
  const missing = h('p', {class: 'empty', hidden: true}, `No queue named "${name}" is configured on this daemon.`);
  const content = h('div', {});
  const tabs = h('div', {class: 'tabs', id: 'status-tabs'},
    h('a', {href: queueHref(name)}, 'Timeline'),
    ...STATUSES.map(s => s === status
      ? h('span', {class: 'tab active', 'data-status': s}, LABELS[s])
      : h('a', {href: hrefOf(s), 'data-status': s}, LABELS[s])),
    h('a', {href: deadHref(name)}, 'Dead letters'));
  root.append(
    h('nav', {class: 'crumbs'}, h('a', {href: '#/'}, 'Queues'), ' / ', h('a', {href: queueHref(name)}, name),
      lane ? ` / lane ${flowKey}` : '', ` / ${LABELS[status]} jobs`),
    missing, content);
  const laneState = h('span', {class: 'queue-state', id: 'lane-state'});
  content.append(
    h('div', {class: 'page-head'},
      h('h1', {}, lane ? [`${LABELS[status]} jobs of lane `, h('code', {id: 'lane-key'}, flowKey)] : `${LABELS[status]} jobs`),
      lane ? laneState : '', total, h('div', {class: 'actions'}, cancelAll)),
    tabs,
    h('p', {class: 'note muted'}, orderNote(status)),
    h('table', {class: 'grid', id: 'jobs'},
      h('thead', {}, h('tr', {},
        h('th', {}, 'Job'), h('th', {}, 'Status'), h('th', {class: 'num'}, 'Priority'), h('th', {}, 'Flow key'), h('th', {}, 'Replace key'),
        h('th', {class: 'num'}, 'Attempts'), h('th', {class: 'time'}, 'Created'), h('th', {class: 'time'}, 'Due'),
        h('th', {}, 'Last error'), h('th', {}, ''))),
      tbody),
    empty, h('div', {class: 'pager'}, first, pageNo, next));

  // The page shown is the one at cursors[cursors.length - 1] ('' = first).
  const cursors = [''];
  let nextCursor = null;
  let count = 0;
  let confirmTimer = null;

  const poller = ctx.poll(async () => {
    const cursor = cursors[cursors.length - 1];
    const query = `status=${status}&limit=${PAGE}` + (cursor ? `&cursor=${q(cursor)}` : '') +
      (lane ? `&flowKey=${q(flowKey)}` : '');
    let queue, page;
    try {
      // A lane's counts are its Key's; a lane with no jobs left is not found
      // and counts nothing (keys.md §6).
      const key = lane ? get(`${path}/keys/${q(flowKey)}`).catch(err => {
        if (err instanceof ApiError && err.status === 404) return null;
        throw err;
      }) : null;
      let k;
      [queue, page, k] = await Promise.all([get(path), get(`${path}/jobs?${query}`), key]);
      if (lane) {
        const c = k ? k.counts : {pending: 0, processing: 0, awaitingAck: 0};
        queue = {...queue, counts: {...c, dead: null}};
        const sig = JSON.stringify(k && k.hold);
        if (laneState.dataset.sig !== sig) {
          laneState.replaceChildren(k ? holdState(k.hold) : '');
          laneState.dataset.sig = sig;
        }
      }
    } catch (err) {
      if (!(err instanceof ApiError && err.status === 404)) throw err;
      missing.hidden = false;
      content.hidden = true;
      return;
    }
    if (!ctx.alive) return;
    missing.hidden = true;
    content.hidden = false;
    count = COUNT[status] && queue.counts[COUNT[status]] !== null ? queue.counts[COUNT[status]] : null;
    setText(total, count === null ? '' : `${count} job${count === 1 ? '' : 's'}`);
    for (const [s, member] of Object.entries(COUNT)) {
      const tab = tabs.querySelector(`[data-status="${s}"]`);
      if (tab && queue.counts[member] !== null) setText(tab, `${LABELS[s]} (${queue.counts[member]})`);
    }
    if (!confirmTimer) {
      cancelAll.disabled = !count;
      setText(cancelAll, count ? `Cancel all ${count}` : 'Cancel all');
    }
    nextCursor = page.nextCursor;
    next.hidden = !nextCursor;
    first.hidden = cursors.length === 1;
    setText(pageNo, cursors.length > 1 || nextCursor ? `page ${cursors.length}` : '');
    empty.hidden = page.jobs.length > 0;
    syncRows(tbody, page.jobs, j => j.id, j => [
      jobLink(j.id),
      badge(j.status.replace('_', ' '), statusTones[j.status] || 'neutral'),
      cell(j.priority ? j.priority : '0', 'num'),
      j.flowKey ? h('code', {}, j.flowKey) : '—',
      j.replaceKey ? h('code', {}, j.replaceKey) : '—',
      cell(`${j.attempts}/${j.maxAttempts}`, 'num'),
      cell(fmtTime(j.createdAt, {ms: false}), 'time mono'),
      cell(fmtTime(j.scheduledFor, {ms: false}), 'time mono'),
      cell(j.lastError || '—', 'error-text'),
      CANCELLABLE.has(j.status)
        ? h('button', {type: 'button', class: 'small cancel', 'data-job': j.id, onclick: ev => cancelOne(ev.currentTarget, j.id)}, 'Cancel')
        : '',
    ]);
  }, 2000);

  next.addEventListener('click', () => {
    if (!nextCursor) return;
    cursors.push(nextCursor);
    poller.now();
  });
  first.addEventListener('click', () => {
    cursors.length = 1;
    poller.now();
  });

  // One job: a second click within a few seconds confirms.
  function cancelOne(button, id) {
    if (button.dataset.confirm !== '1') {
      button.dataset.confirm = '1';
      button.classList.add('confirm');
      setText(button, 'Confirm cancel');
      setTimeout(() => {
        button.dataset.confirm = '';
        button.classList.remove('confirm');
        setText(button, 'Cancel');
      }, 4000);
      return undefined;
    }
    return ctx.act(async () => {
      button.disabled = true;
      await post(`/v1/jobs/${q(id)}/cancel`, {reason: 'cancelled from the console'});
      toast(`Cancelled ${shortId(id)}: it is dead (cancelled) and will not be delivered.`);
      const tr = button.closest('tr');
      if (tr) tr.remove();
      poller.now();
    }).finally(() => { button.disabled = false; });
  }

  // Every job of this status: the confirmation names how many; the API
  // works in bounded batches and says done: false while more match.
  cancelAll.addEventListener('click', () => ctx.act(async () => {
    if (!confirmTimer) {
      setText(cancelAll, `Click again to cancel ${count} ${LABELS[status].toLowerCase()} job${count === 1 ? '' : 's'}`);
      cancelAll.classList.add('confirm');
      confirmTimer = setTimeout(resetConfirm, 4000);
      return;
    }
    resetConfirm();
    cancelAll.disabled = true;
    let cancelled = 0;
    for (let calls = 0; calls < 100; calls++) {
      const filter = lane ? {status: [status], flowKey} : {status: [status]};
      const res = await post(`${path}/cancel`, {...filter, reason: 'cancelled from the console'});
      cancelled += res.cancelled;
      if (res.done) break;
    }
    toast(`Cancelled ${cancelled} job${cancelled === 1 ? '' : 's'}.`);
    cursors.length = 1;
    poller.now();
  }));

  function resetConfirm() {
    clearTimeout(confirmTimer);
    confirmTimer = null;
    cancelAll.classList.remove('confirm');
    setText(cancelAll, count ? `Cancel all ${count}` : 'Cancel all');
  }
}

function orderNote(status) {
  switch (status) {
    case 'pending': return 'In delivery order: highest priority first, then due time. Jobs held back by a delay or a hold are listed where they will go.';
    case 'processing': return 'Deliveries in flight first (by lease deadline), then jobs waiting for a retry or after a defer, in delivery order.';
    case 'awaiting_ack': return 'Delivered, waiting for the worker\'s ack, nack or defer: soonest ack timeout first.';
    case 'completed': return 'Newest first. Completed jobs are kept for the queue\'s retention, then purged.';
    default: return 'Newest death first. The dead letters page replays them.';
  }
}

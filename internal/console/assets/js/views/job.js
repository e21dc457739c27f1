// One job: its state, its full delivery history, and its payload exactly as
// published.

import {request, post, q, ApiError} from '../api.js';
import {h, cell, syncRows, badge, statusTones, queueHref, deadHref, fmtTime, fmtSeconds, toast} from '../dom.js';
import {rawMember, pretty} from '../json.js';
import {withoutStatus} from './queue.js';

export default function jobView(root, [id], ctx) {
  document.title = `${id} · simpleqd`;
  const crumbs = h('nav', {class: 'crumbs'}, h('a', {href: '#/'}, 'Queues'), ' / …');
  const status = h('span', {id: 'job-status'});
  const replay = h('button', {type: 'button', id: 'replay-job', hidden: true}, 'Replay');
  const details = h('dl', {class: 'details'});
  const tbody = h('tbody');
  const payload = h('pre', {class: 'payload', id: 'payload'});
  const missing = h('p', {class: 'empty', hidden: true}, 'No such job: it never existed, or it was purged after the queue\'s retention period.');

  const body = h('div', {},
    details,
    h('h2', {}, 'History'),
    h('table', {class: 'grid', id: 'history'},
      h('thead', {}, h('tr', {},
        h('th', {class: 'num'}, '#'), h('th', {class: 'time'}, 'Time'), h('th', {}, 'Result'),
        h('th', {class: 'num'}, 'HTTP'), h('th', {}, 'Detail'))),
      tbody),
    h('h2', {}, 'Payload'),
    payload);

  root.append(
    crumbs,
    h('div', {class: 'page-head'}, h('h1', {}, 'Job'), h('code', {class: 'job-id'}, id), status, h('div', {class: 'actions'}, replay)),
    missing, body);

  let job = null;
  let lastText = '';
  const poller = ctx.poll(async () => {
    let res;
    try {
      res = await request('GET', `/v1/jobs/${q(id)}`);
    } catch (err) {
      if (err instanceof ApiError && err.status === 404) {
        missing.hidden = false;
        body.hidden = true;
        return;
      }
      throw err;
    }
    if (!ctx.alive || res.text === lastText) return;
    lastText = res.text;
    job = res.data;
    missing.hidden = true;
    body.hidden = false;
    crumbs.replaceChildren(h('a', {href: '#/'}, 'Queues'), ' / ', h('a', {href: queueHref(job.queue)}, job.queue), ' / Job');
    status.replaceChildren(badge(job.status.replace('_', ' '), statusTones[job.status] || 'neutral'));
    replay.hidden = job.status !== 'dead';
    details.replaceChildren(...renderDetails(job));
    const history = job.history.map((a, i) => ({...a, i}));
    syncRows(tbody, history.slice().reverse(), a => a.i, a => [
      cell(a.attempt, 'num'),
      cell(fmtTime(a.timestamp), 'time mono'),
      h('span', {}, badge(a.status, historyTones[a.status] || 'neutral'), a.probe ? badge('probe', 'probing') : null),
      cell(a.webhookStatusCode ?? '—', 'num'),
      historyDetail(a),
    ]);
    const raw = rawMember(res.text, 'payload');
    payload.textContent = raw ? pretty(raw) : JSON.stringify(job.payload, null, 2);
  }, 1500);

  replay.addEventListener('click', () => ctx.act(async () => {
    replay.disabled = true;
    try {
      const {replayed} = await post(`/v1/queues/${q(job.queue)}/dead/replay`, {ids: [id]});
      toast(replayed ? 'Replayed: the job is pending again.' : 'The job is no longer dead.');
      poller.now();
    } finally {
      replay.disabled = false;
    }
  }));
}

const historyTones = {success: 'open', acked: 'open', failed: 'fail', nacked: 'fail', deferred: 'held'};

function historyDetail(a) {
  const parts = [];
  if (a.error) parts.push(withoutStatus(a.error, a.webhookStatusCode));
  if (a.status === 'deferred') {
    if (a.retryAfter !== undefined && a.retryAfter !== null) parts.push(`Retry-After ${fmtSeconds(a.retryAfter)}`);
    if (a.scope) parts.push(`${a.scope} scope`);
    if (a.reason) parts.push(a.reason);
  }
  return parts.filter(Boolean).join(' · ') || '—';
}

function renderDetails(job) {
  const rows = [
    ['Queue', h('a', {href: queueHref(job.queue)}, job.queue)],
    ['Status', job.status.replace('_', ' ')],
    ['Attempts', `${job.attempts} of ${job.maxAttempts} (failures only; backpressure never counts)`],
    ['Defers', String(job.deferCount)],
    ['Created', fmtTime(job.createdAt)],
    ['Scheduled for', fmtTime(job.scheduledFor)],
    ['Expires', fmtTime(job.expiresAt)],
    ['Finished', fmtTime(job.completedAt)],
  ];
  if (job.priority) rows.push(['Priority', `${job.priority} (0-9, higher first)`]);
  if (job.flowKey) rows.push(['Flow key', h('code', {}, job.flowKey)]);
  if (job.replaceKey) rows.push(['Replace key', h('code', {}, job.replaceKey)]);
  if (job.idempotencyKey) rows.push(['Idempotency key', h('code', {}, job.idempotencyKey)]);
  if (job.lastError) rows.push(['Last error', h('span', {class: 'error-text'}, job.lastError)]);
  if (job.deadReason) rows.push(['Dead reason', h('span', {}, badge(job.deadReason, 'dead'), ' ', h('a', {href: deadHref(job.queue)}, 'dead letters'))]);
  return rows.flatMap(([k, v]) => [h('dt', {}, k), h('dd', {}, v)]);
}

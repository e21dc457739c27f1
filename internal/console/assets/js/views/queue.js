// One queue: state and controls (pause, resume), counts, settings, and the
// timeline of recent events this daemon recorded.

import {get, post, q, ApiError} from '../api.js';
import {h, cell, syncRows, holdState, badge, jobLink, deadHref, fmtTime, fmtSeconds, setText, toast} from '../dom.js';
import statsPanel from './charts.js';
import lanesPanel from './lanes.js';
import {jobsHref} from './jobs.js';
import {queueSettingsHref} from './queueform.js';

const TIMELINE = 100;

export default function queueView(root, [name], ctx) {
  document.title = `${name} · simpleqd`;
  const path = `/v1/queues/${q(name)}`;
  const state = h('span', {class: 'queue-state'});
  const reason = h('input', {class: 'reason', placeholder: 'Reason (optional)', maxlength: 500, 'aria-label': 'Pause reason'});
  const pause = h('button', {type: 'button', id: 'pause'}, 'Pause');
  const resume = h('button', {type: 'button', id: 'resume'}, 'Resume');
  // An API queue's settings and delete; the file's queues have none here.
  const edit = h('a', {href: queueSettingsHref(name), class: 'button', id: 'queue-edit', hidden: true}, 'Settings');
  const counts = {
    pending: h('a', {class: 'stat-value', href: jobsHref(name, 'pending')}, '–'),
    processing: h('a', {class: 'stat-value', href: jobsHref(name, 'processing')}, '–'),
    awaitingAck: h('a', {class: 'stat-value', href: jobsHref(name, 'awaiting_ack')}, '–'),
    dead: h('a', {class: 'stat-value', href: deadHref(name)}, '–'),
  };
  const settings = h('p', {class: 'settings muted'});
  const deadTab = h('a', {href: deadHref(name), id: 'dead-tab'}, 'Dead letters');
  const tbody = h('tbody');
  const empty = h('p', {class: 'empty', hidden: true}, 'Nothing has happened on this queue since this daemon started.');
  const note = h('p', {class: 'note muted'});

  const missing = h('p', {class: 'empty', hidden: true}, `No queue named "${name}" is configured on this daemon.`);
  const content = h('div', {});
  root.append(h('nav', {class: 'crumbs'}, h('a', {href: '#/'}, 'Queues'), ' / ', name), missing, content);
  content.append(
    h('div', {class: 'page-head'},
      h('h1', {}, name), state,
      h('div', {class: 'actions'}, reason, pause, resume, edit)),
    h('div', {class: 'stats'},
      stat('Pending', counts.pending), stat('Processing', counts.processing),
      stat('Awaiting ack', counts.awaitingAck), stat('Dead', counts.dead)),
    settings,
    lanesPanel(name, ctx),
    statsPanel(name, ctx),
    h('div', {class: 'tabs'}, h('span', {class: 'tab active'}, 'Timeline'),
      h('a', {href: jobsHref(name, 'pending'), id: 'jobs-tab'}, 'Jobs'), deadTab),
    h('table', {class: 'grid timeline', id: 'timeline'},
      h('thead', {}, h('tr', {}, h('th', {class: 'time'}, 'Time'), h('th', {}, 'Event'), h('th', {}, 'Job'), h('th', {}, 'Detail'))),
      tbody),
    empty, note);

  let current = null;
  const poller = ctx.poll(async () => {
    let queue, evs;
    try {
      [queue, evs] = await Promise.all([get(path), get(`${path}/events?limit=${TIMELINE}`)]);
    } catch (err) {
      if (!(err instanceof ApiError && err.status === 404)) throw err;
      missing.hidden = false;
      content.hidden = true;
      return;
    }
    if (!ctx.alive) return;
    missing.hidden = true;
    content.hidden = false;
    current = queue;
    edit.hidden = queue.source === 'file';
    const st = queue.hold.state;
    const stSig = JSON.stringify(queue.hold);
    if (state.dataset.sig !== stSig) {
      state.replaceChildren(holdState(queue.hold));
      state.dataset.sig = stSig;
    }
    pause.disabled = st === 'paused';
    resume.disabled = st === 'open';
    resume.title = st === 'held' ? 'End the hold now: the queue sends one probe' : '';
    setText(counts.pending, queue.counts.pending);
    setText(counts.processing, queue.counts.processing);
    setText(counts.awaitingAck, queue.mode === 'ack' ? queue.counts.awaitingAck : '—');
    setText(counts.dead, queue.counts.dead);
    counts.dead.classList.toggle('has-dead', queue.counts.dead > 0);
    setText(deadTab, `Dead letters (${queue.counts.dead})`);
    setText(settings, [
      `${queue.mode} mode`,
      `concurrency ${queue.concurrency}`,
      queue.rateLimitMax > 0 ? `rate limit ${queue.rateLimitMax} per ${fmtSeconds(queue.rateLimitWindow)}` : 'no rate limit',
      `max attempts ${queue.maxAttempts}`,
      `max defers ${queue.maxDefers}`,
      `webhook ${queue.webhookUrl}`,
    ].join(' · '));
    empty.hidden = evs.events.length > 0;
    setText(note, `The timeline shows the last ${evs.capacity} events recorded in memory by the daemon serving this page; other daemons of a fleet keep their own, and a restart clears it.`);
    syncRows(tbody, evs.events, e => e.seq,
      e => [cell(fmtTime(e.time), 'time mono'), eventBadge(e), jobLink(e.jobId), eventDetail(e)],
      e => ({kind: e.kind}));
  }, 1000);

  pause.addEventListener('click', () => ctx.act(async () => {
    pause.disabled = true;
    const body = reason.value.trim() ? {reason: reason.value.trim()} : {};
    await post(`${path}/pause`, body);
    reason.value = '';
    toast(`Paused ${name}: nothing is delivered until you resume it.`);
    poller.now();
  }));
  resume.addEventListener('click', () => ctx.act(async () => {
    resume.disabled = true;
    const was = current && current.hold.state;
    await post(`${path}/resume`, {});
    toast(was === 'held' ? `Hold on ${name} ended early: one probe goes out.` : `Resumed ${name}.`);
    poller.now();
  }));
}

function stat(label, value) {
  return h('div', {class: 'stat'}, h('span', {class: 'stat-label'}, label), value);
}

// eventBadge names an event with its tone: green for good news, amber for
// backpressure, blue for probes, red for failures, grey for operator actions.
export function eventBadge(e) {
  switch (e.kind) {
    case 'delivery':
      switch (e.result) {
        case 'completed': return badge(e.probe ? 'probe delivered' : 'delivered', 'open');
        case 'reopened': return badge('probe delivered', 'open');
        case 'awaiting': return badge('delivered, awaiting ack', 'probing');
        case 'deferred': return badge('backpressure', 'held');
        case 'retry': return badge('failed, will retry', 'fail');
        case 'dead': return badge(e.outcome === 'defer' ? 'backpressure' : 'failed', e.outcome === 'defer' ? 'held' : 'dead');
        case 'released': return badge('handed back', 'neutral');
        case 'stale': return badge('outcome ignored', 'neutral');
        default: return badge(e.result || 'delivery', 'neutral');
      }
    case 'probe': return badge('probe sent', 'probing');
    case 'hold': return badge('queue held', 'held');
    case 'reopen': return badge('queue reopened', 'open');
    case 'dead': return badge('dead-lettered', 'dead');
    case 'callback': return badge(e.outcome || 'callback', e.outcome === 'ack' ? 'open' : e.outcome === 'defer' ? 'held' : 'fail');
    case 'pause': return badge('paused', 'paused');
    case 'resume': return badge('resumed', 'paused');
    case 'replay': return badge('replayed', 'paused');
    default: return badge(e.kind, 'neutral');
  }
}

function eventDetail(e) {
  const parts = [];
  if (e.attempt) parts.push(`attempt ${e.attempt}`);
  switch (e.kind) {
    case 'delivery':
      if (e.webhookStatusCode) parts.push(`HTTP ${e.webhookStatusCode}`);
      if (e.retryAfter) parts.push(`Retry-After ${fmtSeconds(e.retryAfter)}`);
      if (e.error) parts.push(withoutStatus(e.error, e.webhookStatusCode));
      if (e.result === 'retry' && e.until) parts.push(`retry at ${fmtTime(e.until, {ms: false})}`);
      break;
    case 'probe':
      parts.push('the only delivery until it succeeds');
      break;
    case 'hold':
      parts.push(`wait ${fmtSeconds(e.retryAfter || 0)}`);
      if (e.until) parts.push(`until ${fmtTime(e.until)}`);
      if (e.reason) parts.push(e.reason);
      break;
    case 'reopen':
      parts.push('probe succeeded; normal concurrency resumes');
      break;
    case 'dead':
      parts.push(e.reason || '');
      break;
    case 'callback':
      if (e.result) parts.push(e.result);
      if (e.retryAfter) parts.push(`retryAfter ${fmtSeconds(e.retryAfter)}`);
      if (e.reason) parts.push(e.reason);
      break;
    case 'pause':
      parts.push(e.reason ? `by an operator: ${e.reason}` : 'by an operator');
      break;
    case 'resume':
      parts.push('by an operator');
      break;
    case 'replay':
      parts.push(`${e.count} dead job${e.count === 1 ? '' : 's'} back to pending`);
      break;
  }
  return parts.filter(Boolean).join(' · ');
}

// withoutStatus drops the "webhook responded 500" prefix the detail already
// shows as "HTTP 500", keeping the response snippet after it.
export function withoutStatus(error, code) {
  const prefix = `webhook responded ${code}`;
  if (!code || !error.startsWith(prefix)) return error;
  return error.slice(prefix.length).replace(/^:\s*/, '');
}

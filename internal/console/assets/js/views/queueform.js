// Queues over the API (runtime.md §1): create one (PUT /v1/queues/{queue}),
// change its settings (PATCH, only the settings that changed) and delete it
// (DELETE, after a confirmation that says what happens to its jobs, with
// ?purge=true when it still has some). The file's queues are the file's:
// the API answers 409 for them, so the page only says so. The signing
// secret is a password input that is never filled in; the API returns only
// its last 4 characters (signingSecretHint). The API's 400 fieldErrors are
// shown next to their fields.

import {get, put, patch, del, q, ApiError} from '../api.js';
import {h, queueHref, setText, toast} from '../dom.js';

export const newQueueHref = '#/new-queue';
export const queueSettingsHref = name => `#/queues/${encodeURIComponent(name)}/settings`;

// The settings the form edits, as the API names them. Durations are seconds.
const FIELDS = [
  {name: 'webhookUrl', label: 'Webhook URL', type: 'url', required: true, placeholder: 'https://worker.example/hooks/emails'},
  {name: 'signingSecret', label: 'Signing secret', type: 'password', required: true},
  {name: 'mode', label: 'Mode', type: 'select', options: ['standard', 'ack']},
  {name: 'concurrency', label: 'Concurrency', type: 'number', min: 1},
  {name: 'rateLimitMax', label: 'Rate limit (jobs per window, 0 = none)', type: 'number', min: 0},
  {name: 'rateLimitWindow', label: 'Rate limit window (seconds)', type: 'number', min: 0, step: 'any'},
  {name: 'maxAttempts', label: 'Max attempts', type: 'number', min: 1},
  {name: 'maxDefers', label: 'Max defers', type: 'number', min: 0},
];

// COUNTED are the counts a delete without purge refuses (not terminal).
const COUNTED = ['pending', 'processing', 'awaitingAck'];

export default function queueFormView(root, [name], ctx) {
  const editing = name !== undefined;
  document.title = (editing ? `${name} settings` : 'New queue') + ' · simpleqd';
  const inputs = {};
  const errors = {};
  const secretHint = h('span', {class: 'muted small', id: 'secret-hint'});
  const rows = FIELDS.map(f => {
    const id = `qf-${f.name}`;
    const attrs = {id, name: f.name, class: 'field-input', autocomplete: 'off', spellcheck: 'false'};
    let input;
    if (f.type === 'select') {
      input = h('select', attrs, f.options.map(o => h('option', {value: o}, o)));
    } else {
      input = h('input', {...attrs, type: f.type, min: f.min, step: f.step, placeholder: f.placeholder,
        autocomplete: f.type === 'password' ? 'new-password' : 'off'});
    }
    inputs[f.name] = input;
    errors[f.name] = h('span', {class: 'field-error', id: `${id}-error`, 'data-field': f.name, role: 'alert'});
    const hint = f.name === 'signingSecret' ? secretHint : null;
    return h('div', {class: 'field'}, h('label', {for: id}, f.label), input, hint, errors[f.name]);
  });
  const nameInput = h('input', {id: 'qf-name', name: 'name', class: 'field-input', required: true, autocomplete: 'off', spellcheck: 'false',
    placeholder: 'acme-emails'});
  const nameError = h('span', {class: 'field-error', id: 'qf-name-error', role: 'alert'});
  const formError = h('p', {class: 'form-error', id: 'queue-form-error', role: 'alert'});
  const submit = h('button', {type: 'submit', class: 'primary', id: 'queue-save'}, editing ? 'Save changes' : 'Create queue');
  const form = h('form', {id: 'queue-form', class: 'card queue-form', method: 'post', action: '#', novalidate: true},
    editing ? null : h('div', {class: 'field'}, h('label', {for: 'qf-name'}, 'Name'), nameInput, nameError),
    rows, formError, h('div', {class: 'form-actions'}, submit, h('a', {href: editing ? queueHref(name) : '#/'}, 'Cancel')));
  if (editing) {
    inputs.signingSecret.required = false;
    inputs.signingSecret.placeholder = 'Leave empty to keep the current secret';
  }

  const crumbs = h('nav', {class: 'crumbs'}, h('a', {href: '#/'}, 'Queues'), ' / ',
    editing ? [h('a', {href: queueHref(name)}, name), ' / settings'] : 'new queue');
  const missing = h('p', {class: 'empty', hidden: true, id: 'queue-form-missing'});
  const content = h('div', {hidden: editing});
  const danger = h('section', {class: 'card danger', id: 'queue-delete', hidden: !editing});
  root.append(crumbs, missing, content);
  content.append(
    h('div', {class: 'page-head'}, h('h1', {}, editing ? `Settings of ${name}` : 'New queue'),
      h('span', {class: 'muted'}, editing ? 'Only the settings you change are sent (PATCH).' : 'Created over the API (PUT); settings not given come from the file\'s defaults.')),
    form, danger);

  let loaded = null; // the queue as GET answered, for PATCH's diff

  function clearErrors() {
    for (const el of [...Object.values(errors), nameError]) setText(el, '');
    for (const el of [...Object.values(inputs), nameInput]) el.removeAttribute('aria-invalid');
    setText(formError, '');
  }

  // showErrors puts each fieldErrors message under its field; the others
  // (formErrors, a 409, a field the form has no input for) above the button.
  function showErrors(err) {
    if (!(err instanceof ApiError)) throw err;
    const rest = [...err.formErrors];
    for (const [field, msgs] of Object.entries(err.fieldErrors)) {
      const top = field.split('.')[0];
      if (errors[top]) {
        setText(errors[top], msgs.join(', '));
        inputs[top].setAttribute('aria-invalid', 'true');
      } else {
        rest.push(`${field}: ${msgs.join(', ')}`);
      }
    }
    if (!Object.keys(err.fieldErrors).length && !err.formErrors.length) rest.push(err.message);
    if (!editing && rest.some(m => m.startsWith('Queue name'))) {
      setText(nameError, rest.filter(m => m.startsWith('Queue name')).join(' '));
      nameInput.setAttribute('aria-invalid', 'true');
    }
    setText(formError, rest.filter(m => editing || !m.startsWith('Queue name')).join(' '));
  }

  function valueOf(f) {
    const raw = inputs[f.name].value.trim();
    if (raw === '') return undefined;
    return f.type === 'number' ? Number(raw) : raw;
  }

  form.addEventListener('submit', ev => {
    ev.preventDefault();
    ctx.act(async () => {
      clearErrors();
      const body = {};
      for (const f of FIELDS) {
        const v = valueOf(f);
        if (v === undefined) continue;
        if (editing && f.name !== 'signingSecret' && loaded && loaded[f.name] === v) continue;
        body[f.name] = v;
      }
      if (!editing) {
        const qn = nameInput.value.trim();
        if (!qn) { setText(nameError, 'Required'); nameInput.setAttribute('aria-invalid', 'true'); return; }
        submit.disabled = true;
        try {
          const created = await put(`/v1/queues/${q(qn)}`, body);
          toast(`Created ${created.name}: every daemon serves it within a second.`);
          location.hash = queueHref(created.name);
        } catch (err) {
          showErrors(err);
        } finally {
          submit.disabled = false;
        }
        return;
      }
      if (!Object.keys(body).length) { setText(formError, 'Nothing changed.'); return; }
      submit.disabled = true;
      try {
        const now = await patch(`/v1/queues/${q(name)}`, body);
        toast(`Saved ${name}: ${Object.keys(body).join(', ')} changed.`);
        fill(now);
      } catch (err) {
        showErrors(err);
      } finally {
        submit.disabled = false;
      }
    });
  });

  function fill(queue) {
    loaded = queue;
    for (const f of FIELDS) {
      if (f.name === 'signingSecret') continue;
      const v = queue[f.name];
      inputs[f.name].value = v === undefined || v === null ? '' : String(v);
    }
    inputs.signingSecret.value = '';
    setText(secretHint, queue.signingSecretHint ? `Current secret ends in …${queue.signingSecretHint}` : '');
    renderDanger(queue);
  }

  // The delete panel: what a delete does, with the jobs it would remove
  // from the queue's counts; a second click confirms.
  let confirming = false;
  function renderDanger(queue) {
    const jobs = COUNTED.reduce((n, k) => n + (queue.counts[k] || 0), 0);
    const purge = jobs > 0;
    const dead = queue.counts.dead;
    const rest = `${dead ? `its ${dead} dead letter${dead === 1 ? '' : 's'}, ` : ''}its completed jobs, its schedules and the queue itself from every daemon; publishing to ${name} answers 404 afterwards`;
    const what = purge
      ? `${name} still has ${jobs} job${jobs === 1 ? '' : 's'} waiting, in flight or awaiting ack (${queue.counts.pending} pending, ${queue.counts.processing} processing, ${queue.counts.awaitingAck} awaiting ack). Deleting it with purge removes ${jobs === 1 ? 'that job' : `those ${jobs} jobs`} (never delivered), then ${rest}.`
      : `${name} has no job waiting, in flight or awaiting ack. Deleting it removes ${rest}.`;
    const button = h('button', {type: 'button', class: 'confirm-delete', id: 'queue-delete-button'},
      purge ? `Delete ${name} and purge ${jobs} job${jobs === 1 ? '' : 's'}` : `Delete ${name}`);
    const cancel = h('button', {type: 'button', class: 'link', id: 'queue-delete-cancel'}, 'Keep it');
    const confirmBox = h('div', {class: 'confirm-box', id: 'queue-delete-confirm'},
      h('p', {}, h('strong', {}, 'This cannot be undone. '), what), h('div', {class: 'form-actions'}, button, cancel));
    const start = h('button', {type: 'button', id: 'queue-delete-start'}, 'Delete queue…');
    const sig = `${confirming}|${what}`;
    if (danger.dataset.sig === sig) return;
    danger.dataset.sig = sig;
    danger.replaceChildren(h('h2', {}, 'Delete this queue'), confirming ? confirmBox : start);
    start.addEventListener('click', () => { confirming = true; renderDanger(loaded); });
    cancel.addEventListener('click', () => { confirming = false; renderDanger(loaded); });
    button.addEventListener('click', () => ctx.act(async () => {
      button.disabled = true;
      try {
        await del(`/v1/queues/${q(name)}` + (purge ? '?purge=true' : ''));
      } catch (err) {
        button.disabled = false;
        if (err instanceof ApiError && err.status === 409) { toast(err.message, 'error'); poller.now(); return; }
        throw err;
      }
      toast(purge ? `Deleted ${name} and its ${jobs} job${jobs === 1 ? '' : 's'}.` : `Deleted ${name}.`);
      location.hash = '#/';
    }));
  }

  let poller = {now() {}};
  if (!editing) {
    nameInput.focus();
    return;
  }
  // The counts change while the page is open: the delete panel follows
  // them, so its confirmation says how many jobs a purge removes now.
  poller = ctx.poll(async () => {
    let queue;
    try {
      queue = await get(`/v1/queues/${q(name)}`);
    } catch (err) {
      if (!(err instanceof ApiError && err.status === 404)) throw err;
      setText(missing, `No queue named "${name}" is configured on this daemon.`);
      missing.hidden = false;
      content.hidden = true;
      return;
    }
    if (!ctx.alive) return;
    if (queue.source === 'file') {
      setText(missing, `${name} is declared in the configuration file: change it there (the API refuses to write it).`);
      missing.hidden = false;
      content.hidden = true;
      return;
    }
    missing.hidden = true;
    if (content.hidden) {
      content.hidden = false;
      fill(queue);
      return;
    }
    loaded = {...queue, ...Object.fromEntries(FIELDS.map(f => [f.name, loaded[f.name]]))};
    renderDanger(queue);
  }, 2000);
}

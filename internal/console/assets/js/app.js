// The console's shell: authentication, hash routing, polling and errors.
// Views (views/*.js) are functions view(root, params, ctx) that build their
// page into root and use ctx to poll and to run actions; ctx stops their
// pollers when the route changes.

import {get, getKey, setKey, clearKey, Unauthorized, ApiError} from './api.js';
import {h, setText, toast, jobHref} from './dom.js';
import queuesView from './views/queues.js';
import queueView from './views/queue.js';
import deadView from './views/dead.js';
import jobView from './views/job.js';
import jobsView, {laneJobsView} from './views/jobs.js';
import schedulesView from './views/schedules.js';
import queueFormView from './views/queueform.js';

const routes = [
  [/^\/?$/, queuesView],
  [/^\/queues\/([^/]+)\/?$/, queueView],
  [/^\/queues\/([^/]+)\/dead\/?$/, deadView],
  [/^\/jobs\/([^/]+)\/?$/, jobView],
  [/^\/queues\/([^/]+)\/jobs(?:\/([a-z_]+))?\/?$/, jobsView],
  [/^\/queues\/([^/]+)\/keys\/([^/]+)\/jobs(?:\/([a-z_]+))?\/?$/, laneJobsView],
  [/^\/schedules\/?$/, schedulesView],
  [/^\/queues\/([^/]+)\/schedules\/?$/, schedulesView],
  [/^\/new-queue\/?$/, queueFormView],
  [/^\/queues\/([^/]+)\/settings\/?$/, queueFormView],
];

const main = document.getElementById('main');
const nav = document.getElementById('nav');
const logout = document.getElementById('logout');
const conn = document.getElementById('conn');

// auth: 'key' (signed in with a key), 'open' (the daemon has no API keys),
// 'login' (showing the login form).
const app = {auth: 'login', loginMessage: '', ctx: null};

// ---- connection indicator ----

function setConn(kind, text) {
  conn.dataset.state = kind;
  setText(conn, text);
}

// handleError is where every failed poll or action ends up.
function handleError(err, {quiet = false} = {}) {
  if (err instanceof Unauthorized) {
    if (app.auth === 'login') return; // another request's 401 is showing the form
    requireLogin(app.auth === 'key' ? 'Your API key was not accepted. Please sign in again.' : '');
    return;
  }
  if (err instanceof ApiError) {
    setConn(err.status === 503 ? 'warn' : 'ok', err.status === 503 ? 'Redis unavailable' : 'live');
    if (!quiet) toast(err.message, 'error');
    return err;
  }
  setConn('down', 'daemon unreachable — retrying');
  if (!quiet) toast(`Request failed: ${err.message}`, 'error');
  return err;
}

// ---- view context ----

function makeCtx() {
  let alive = true;
  const stops = [];
  return {
    get alive() { return alive; },
    /**
     * poll runs fn now and then every ms after it settles (never two at once).
     * It returns {now()} to refresh at once, e.g. after an action.
     */
    poll(fn, ms) {
      let timer = null;
      let running = false;
      let again = false;
      const run = async () => {
        clearTimeout(timer);
        if (!alive) return;
        if (running) { again = true; return; }
        running = true;
        try {
          await fn();
          setConn('ok', 'live');
        } catch (err) {
          handleError(err, {quiet: true});
        } finally {
          running = false;
        }
        if (!alive) return;
        if (again) { again = false; run(); return; }
        timer = setTimeout(run, ms);
      };
      stops.push(() => clearTimeout(timer));
      run();
      return {now: run};
    },
    /** act runs a user action; errors become a toast (or the login form). */
    async act(fn) {
      try {
        return await fn();
      } catch (err) {
        handleError(err);
        return undefined;
      }
    },
    stop() {
      alive = false;
      stops.forEach(f => f());
    },
  };
}

// ---- rendering ----

function render() {
  if (app.ctx) app.ctx.stop();
  app.ctx = null;
  const signedIn = app.auth !== 'login';
  nav.hidden = !signedIn;
  logout.hidden = app.auth !== 'key';
  conn.hidden = !signedIn;
  document.body.dataset.auth = app.auth;
  if (!signedIn) {
    main.replaceChildren(loginForm());
    document.title = 'Sign in · simpleqd';
    main.querySelector('input').focus();
    return;
  }
  const path = location.hash.replace(/^#/, '') || '/';
  for (const [re, view] of routes) {
    const m = re.exec(path);
    if (!m) continue;
    let params;
    try {
      params = m.slice(1).map(decodeURIComponent);
    } catch {
      break;
    }
    const root = h('div', {class: 'view'});
    main.replaceChildren(root);
    app.ctx = makeCtx();
    view(root, params, app.ctx);
    for (const a of nav.querySelectorAll('a')) a.classList.toggle('active', path === '/' && a.getAttribute('href') === '#/');
    return;
  }
  document.title = 'Not found · simpleqd';
  main.replaceChildren(h('div', {class: 'view'},
    h('h1', {}, 'Not found'),
    h('p', {}, 'No page here. ', h('a', {href: '#/'}, 'Back to the queues'), '.')));
}

function requireLogin(message) {
  clearKey();
  app.auth = 'login';
  app.loginMessage = message || '';
  render();
}

function loginForm() {
  const input = h('input', {id: 'api-key', name: 'key', type: 'password', autocomplete: 'off', spellcheck: 'false', required: true});
  const error = h('p', {class: 'form-error', id: 'login-error', role: 'alert'}, app.loginMessage);
  const button = h('button', {type: 'submit', class: 'primary'}, 'Sign in');
  const form = h('form', {id: 'login-form', method: 'post', action: '#'},
    h('label', {for: 'api-key'}, 'API key'), input, error, button);
  form.addEventListener('submit', async ev => {
    ev.preventDefault();
    const key = input.value.trim();
    if (!key) return;
    button.disabled = true;
    setText(error, '');
    try {
      await get('/v1/queues', {key});
      setKey(key);
      app.auth = 'key';
      app.loginMessage = '';
      render();
    } catch (err) {
      if (err instanceof Unauthorized) setText(error, 'That key was not accepted.');
      else if (err instanceof ApiError) setText(error, err.message);
      else setText(error, `Could not reach the daemon: ${err.message}`);
      input.select();
    } finally {
      button.disabled = false;
    }
  });
  return h('section', {class: 'login card'},
    h('h1', {}, 'Sign in'),
    h('p', {class: 'muted'}, 'Enter one of this daemon\'s API keys (auth.apiKeys). It is kept in this browser tab only and sent as a Bearer token with every API request.'),
    form);
}

// ---- start ----

document.getElementById('find-job').addEventListener('submit', ev => {
  ev.preventDefault();
  const input = ev.target.elements.id;
  const id = input.value.trim();
  if (id) location.hash = jobHref(id);
  input.value = '';
  input.blur();
});

logout.addEventListener('click', () => requireLogin(''));
window.addEventListener('hashchange', () => { if (app.auth !== 'login') render(); });

async function boot() {
  if (getKey()) {
    app.auth = 'key';
  } else {
    // A daemon without API keys (loopback development) answers without one.
    try {
      await get('/v1/queues', {key: ''});
      app.auth = 'open';
    } catch (err) {
      app.auth = 'login';
      if (!(err instanceof Unauthorized)) app.loginMessage = `Could not reach the daemon: ${err.message}`;
    }
  }
  render();
}

boot();

// The console's only way to data: the daemon's public JSON API, with the
// operator's API key as a Bearer token. The key lives in sessionStorage, so
// it is gone when the tab closes and is never sent anywhere but this origin.

const KEY_NAME = 'simpleqd.apiKey';

// The API's root: the console is served at <base>console/, the API at <base>v1/.
// Deriving it keeps the console working behind a reverse proxy that adds a prefix.
const BASE = location.pathname.replace(/console\/.*$/, '');

/** Thrown when the API answers 401: the caller shows the login form. */
export class Unauthorized extends Error {
  constructor() { super('unauthorized'); this.name = 'Unauthorized'; }
}

/**
 * Any other non-2xx answer, with the API's error message. fieldErrors and
 * formErrors are the validation object's members ({} and [] otherwise), so
 * a form can show each message next to its field.
 */
export class ApiError extends Error {
  constructor(status, message, data) {
    super(message);
    this.name = 'ApiError';
    this.status = status;
    const e = data && typeof data.error === 'object' && data.error ? data.error : {};
    this.fieldErrors = e.fieldErrors || {};
    this.formErrors = e.formErrors || [];
  }
}

export function getKey() { return sessionStorage.getItem(KEY_NAME) || ''; }
export function setKey(key) { sessionStorage.setItem(KEY_NAME, key); }
export function clearKey() { sessionStorage.removeItem(KEY_NAME); }

// errorMessage renders the API's error member: a string, or a validation
// object {formErrors, fieldErrors}.
function errorMessage(status, data) {
  const e = data && data.error;
  if (typeof e === 'string') return e;
  if (e && typeof e === 'object') {
    const parts = [...(e.formErrors || [])];
    for (const [field, msgs] of Object.entries(e.fieldErrors || {})) parts.push(`${field}: ${msgs.join(', ')}`);
    if (parts.length) return parts.join('; ');
  }
  return `HTTP ${status}`;
}

/**
 * request calls the API. It resolves to {data, text} (text is the raw body,
 * for callers that need exact number literals) and rejects with Unauthorized,
 * ApiError, or a TypeError when the daemon cannot be reached.
 */
export async function request(method, path, body, {key = getKey()} = {}) {
  const headers = {Accept: 'application/json'};
  if (key) headers.Authorization = `Bearer ${key}`;
  const init = {method, headers, cache: 'no-store', credentials: 'omit', redirect: 'error'};
  if (body !== undefined) {
    headers['Content-Type'] = 'application/json';
    init.body = JSON.stringify(body);
  }
  const res = await fetch(BASE + path.replace(/^\//, ''), init);
  const text = await res.text();
  if (res.status === 401) throw new Unauthorized();
  let data = null;
  try { data = text ? JSON.parse(text) : null; } catch { /* not JSON: keep null */ }
  if (!res.ok) throw new ApiError(res.status, errorMessage(res.status, data), data);
  return {data, text};
}

export const get = (path, opts) => request('GET', path, undefined, opts).then(r => r.data);
export const post = (path, body = {}) => request('POST', path, body).then(r => r.data);
export const put = (path, body = {}) => request('PUT', path, body).then(r => r.data);
export const patch = (path, body = {}) => request('PATCH', path, body).then(r => r.data);
// DELETE carries {}: the API refuses a write without a JSON Content-Type.
export const del = path => request('DELETE', path, {}).then(r => r.data);

export const q = encodeURIComponent;

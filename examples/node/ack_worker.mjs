#!/usr/bin/env node
// Ack-mode simpleqd (SimpleQ) worker, Node 20, no dependencies.
//
// The webhook verifies the delivery and answers 200 at once ("received"),
// then does the work out of band and reports the outcome with a callback:
//   ack    the work succeeded
//   defer  the provider was rate-limited (429/503/529): the queue waits the
//          provider's Retry-After and the job is redelivered, no attempt spent
//   nack   a failure; retryable unless the provider refused the input (4xx)
// If this process dies mid-job the work is lost, but the queue's ackTimeout
// (with ackTimeoutAction: retry) redelivers it.
//
// Environment:
//   SIMPLEQ_URL      the daemon's API (default http://127.0.0.1:8080)
//   SIMPLEQ_API_KEY  a key from the daemon's auth.apiKeys (empty: none)
//   SIGNING_SECRET   the queue's signingSecret; several, comma-separated, while rotating
//   ALLOW_UNTIMESTAMPED  1 accepts deliveries signed with x-simpleq-signature only
//                    (SimpleQ's hosted service), giving up replay protection for them
//   LISTEN           host:port to listen on (default 127.0.0.1:9000); webhook path /webhook
//   PROVIDER_URL     the downstream to call; empty starts a built-in fake that 429s 3 calls
//
// Queue config: mode: ack, webhookUrl: http://<LISTEN>/webhook.

import { createServer } from 'node:http';
import { setTimeout as sleep } from 'node:timers/promises';

import { verifyDelivery } from './verify.mjs';

const SECRETS = (process.env.SIGNING_SECRET ?? '').split(',').filter(Boolean);
const ALLOW_UNTIMESTAMPED = process.env.ALLOW_UNTIMESTAMPED === '1';
const TOLERANCE = 5 * 60; // seconds a webhook-timestamp may be from this clock, either way
const LISTEN = process.env.LISTEN || '127.0.0.1:9000';
let PROVIDER_URL = process.env.PROVIDER_URL || '';
const SIMPLEQ_URL = (process.env.SIMPLEQ_URL || 'http://127.0.0.1:8080').replace(/\/+$/, '');
const SIMPLEQ_API_KEY = process.env.SIMPLEQ_API_KEY || '';
const FALLBACK_WAIT = 10; // seconds, when the provider gives no usable wait (e.g. a 529)
const BACKPRESSURE = new Set([429, 503, 529]);

const log = (msg) => console.log(`[ack_worker] ${msg}`);

// Returns undefined when the delivery is authentic and fresh, otherwise why
// not (verify.mjs, with this worker's settings).
const verify = (raw, headers) =>
  verifyDelivery(raw, headers, { secrets: SECRETS, tolerance: TOLERANCE, allowUntimestamped: ALLOW_UNTIMESTAMPED });

// The provider's wait in seconds: retry-after-ms (OpenAI), Retry-After
// (seconds or HTTP-date), or a Gemini RetryInfo retryDelay ("7s") in the JSON
// body. undefined when there is none.
function retryAfterSeconds(headers, bodyText) {
  const ms = Number.parseFloat(headers.get('retry-after-ms') ?? '');
  if (Number.isFinite(ms) && ms >= 0) return ms / 1000;
  const ra = (headers.get('retry-after') ?? '').trim();
  if (ra !== '') {
    const secs = Number(ra);
    if (Number.isFinite(secs)) {
      if (secs >= 0) return secs;
    } else {
      const when = Date.parse(ra);
      if (!Number.isNaN(when)) return Math.max(0, (when - Date.now()) / 1000);
    }
  }
  try {
    return findRetryDelay(JSON.parse(bodyText));
  } catch {
    return undefined;
  }
}

function findRetryDelay(node) {
  if (node === null || typeof node !== 'object') return undefined;
  if (!Array.isArray(node) && typeof node.retryDelay === 'string' && node.retryDelay.endsWith('s')) {
    const v = Number(node.retryDelay.slice(0, -1));
    if (Number.isFinite(v) && v >= 0) return v;
  }
  for (const child of Object.values(node)) {
    const found = findRetryDelay(child);
    if (found !== undefined) return found;
  }
  return undefined;
}

// Calls the simpleqd API. Retries network errors, 429 and 5xx with
// exponential backoff and jitter, honouring Retry-After; a 4xx is returned as
// is (the request itself is wrong, or the job moved on: 409).
async function api(method, path, body, retries = 3) {
  const headers = { 'content-type': 'application/json' };
  if (SIMPLEQ_API_KEY) headers.authorization = `Bearer ${SIMPLEQ_API_KEY}`;
  for (let attempt = 0; ; attempt++) {
    let wait;
    try {
      const res = await fetch(`${SIMPLEQ_URL}${path}`, {
        method,
        headers,
        body: body === undefined ? undefined : JSON.stringify(body),
        signal: AbortSignal.timeout(10_000),
      });
      const text = await res.text();
      if (res.ok || (res.status < 500 && res.status !== 429) || attempt >= retries) {
        return { status: res.status, body: text ? JSON.parse(text) : null };
      }
      wait = retryAfterSeconds(res.headers, '');
    } catch (err) {
      if (attempt >= retries) throw err;
    }
    if (wait === undefined) {
      const base = 0.2 * 2 ** attempt;
      wait = base / 2 + (Math.random() * base) / 2;
    }
    await sleep(wait * 1000);
  }
}

// POST /v1/jobs/:id/ack|nack|defer, naming the attempt so a late report from
// a delivery that was since redelivered is refused (409), not applied.
async function callback(job, kind, body = {}) {
  const { status, body: answer } = await api('POST', `/v1/jobs/${job.id}/${kind}`, { ...body, attempt: job.attempt });
  if (status === 409) {
    log(`job ${job.id} attempt ${job.attempt}: ${kind} refused, the job has moved on: ${JSON.stringify(answer)}`);
  } else if (status !== 200) {
    log(`job ${job.id} attempt ${job.attempt}: ${kind} failed: ${status} ${JSON.stringify(answer)}`);
  } else {
    log(`job ${job.id} attempt ${job.attempt}: ${kind}`);
  }
}

// Calls the provider with no retries of its own: its 429 must reach us so
// we can defer ("let SimpleQ own the backoff").
async function callProvider(payload) {
  const res = await fetch(PROVIDER_URL, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify(payload),
    signal: AbortSignal.timeout(30_000),
  });
  return { status: res.status, headers: res.headers, text: await res.text() };
}

async function processJob(job) {
  let provider;
  try {
    provider = await callProvider(job.payload);
  } catch (err) {
    return callback(job, 'nack', { retryable: true, reason: `provider unreachable: ${err.message}` });
  }
  if (BACKPRESSURE.has(provider.status)) {
    const retryAfter = retryAfterSeconds(provider.headers, provider.text) ?? FALLBACK_WAIT;
    return callback(job, 'defer', { retryAfter, reason: `provider ${provider.status}` });
  }
  if (provider.status >= 400 && provider.status < 500) {
    return callback(job, 'nack', { retryable: false, reason: `provider ${provider.status}` });
  }
  if (provider.status >= 300) {
    return callback(job, 'nack', { retryable: true, reason: `provider ${provider.status}` });
  }
  return callback(job, 'ack');
}

async function handle(req, res) {
  if (req.method !== 'POST' || req.url !== '/webhook') return answer(res, 404);
  const chunks = [];
  for await (const chunk of req) chunks.push(chunk);
  const raw = Buffer.concat(chunks);
  const why = verify(raw, req.headers);
  if (why) {
    log(`refused a delivery: ${why}`);
    return answer(res, 401);
  }
  const job = JSON.parse(raw.toString('utf8'));
  answer(res, 200); // received; the outcome follows as a callback
  processJob(job).catch((err) => log(`job ${job.id}: could not report: ${err.message}; ackTimeout will redeliver it`));
}

function answer(res, status) {
  res.writeHead(status, { 'content-length': '0' });
  res.end();
}

// Start-up diagnostic: warn about queues that deliver here in standard mode
// (they would complete jobs on the 200, before the work is done).
async function checkQueues() {
  try {
    const { status, body } = await api('GET', '/v1/queues', undefined, 0);
    if (status !== 200) throw new Error(`${status} ${JSON.stringify(body)}`);
    for (const q of body.queues) {
      if (!q.webhookUrl.includes(`${LISTEN}/webhook`)) continue;
      if (q.mode !== 'ack') {
        log(`WARNING: queue '${q.name}' delivers here in ${q.mode} mode; this worker is for ack mode`);
      } else {
        log(`serving queue '${q.name}' (ack mode, concurrency ${q.concurrency})`);
      }
    }
  } catch (err) {
    log(`could not list queues (is SIMPLEQ_URL right?): ${err.message}`);
  }
}

// A stand-in provider that answers 429 + Retry-After: 1 to its first
// `limited` calls, so the example shows backpressure on its own.
async function startFakeProvider(limited = 3) {
  let calls = 0;
  const srv = createServer((req, res) => {
    req.resume();
    req.on('end', () => {
      calls += 1;
      if (calls <= limited) {
        res.writeHead(429, { 'retry-after': '1', 'content-type': 'application/json' });
        res.end('{"error":"rate limited"}');
      } else {
        res.writeHead(200, { 'content-type': 'application/json' });
        res.end('{"ok":true}');
      }
    });
  });
  await new Promise((resolve) => srv.listen(0, '127.0.0.1', resolve));
  return `http://127.0.0.1:${srv.address().port}/v1/messages`;
}

async function main() {
  if (SECRETS.length === 0) {
    console.error('SIGNING_SECRET is required');
    process.exit(1);
  }
  if (!PROVIDER_URL) {
    PROVIDER_URL = await startFakeProvider();
    log(`PROVIDER_URL not set: using a fake provider at ${PROVIDER_URL}`);
  }
  await checkQueues();
  const [host, port] = [LISTEN.slice(0, LISTEN.lastIndexOf(':')), Number(LISTEN.slice(LISTEN.lastIndexOf(':') + 1))];
  const server = createServer((req, res) => {
    handle(req, res).catch((err) => {
      log(`handler error: ${err.message}`);
      if (!res.headersSent) answer(res, 500);
    });
  });
  server.listen(port, host, () => log(`ack-mode worker listening on http://${LISTEN}/webhook`));
  process.on('SIGTERM', () => server.close(() => process.exit(0)));
}

main();

#!/usr/bin/env node
// Standard-mode simpleqd (SimpleQ) worker, Node 20, no dependencies.
//
// The webhook does the work synchronously and its HTTP answer is the outcome:
// 200 completes the job, 500 is a failure (retried with backoff, spends an
// attempt). When the provider it calls is rate-limited (429/503/529), it
// relays the provider's status and wait with Retry-After, so simpleqd holds
// the queue and redelivers later without spending an attempt.
//
// Environment:
//   SIGNING_SECRET   the queue's signingSecret; several, comma-separated, while rotating
//   ALLOW_UNTIMESTAMPED  1 accepts deliveries signed with x-simpleq-signature only
//                    (SimpleQ's hosted service), giving up replay protection for them
//   LISTEN           host:port to listen on (default 127.0.0.1:9000); webhook path /webhook
//   PROVIDER_URL     the downstream to call; empty starts a built-in fake that 429s 3 calls
//   SIMPLEQ_URL      the daemon's API (default http://127.0.0.1:8080); only used at start-up
//                    to check that the queues delivering here are in standard mode
//   SIMPLEQ_API_KEY  a key from the daemon's auth.apiKeys (empty: none)
//
// Queue config: mode: standard, webhookUrl: http://<LISTEN>/webhook.

import { createServer } from 'node:http';

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

const log = (msg) => console.log(`[standard_worker] ${msg}`);

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

// Whole seconds as an integer; a sub-second wait as a decimal, which simpleqd
// honours exactly.
const formatRetryAfter = (s) => (Number.isInteger(s) ? String(s) : String(Number(s.toFixed(3))));

// Calls the provider with no retries of its own: its 429 must reach us so
// we can relay it ("let SimpleQ own the backoff").
async function callProvider(payload) {
  const res = await fetch(PROVIDER_URL, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify(payload),
    signal: AbortSignal.timeout(10_000),
  });
  return { status: res.status, headers: res.headers, text: await res.text() };
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
  let provider;
  try {
    provider = await callProvider(job.payload);
  } catch (err) {
    log(`job ${job.id} attempt ${job.attempt}: provider unreachable: ${err.message}`);
    return answer(res, 500); // a real failure: retried with backoff
  }
  if (BACKPRESSURE.has(provider.status)) {
    const wait = retryAfterSeconds(provider.headers, provider.text) ?? FALLBACK_WAIT;
    log(`job ${job.id} attempt ${job.attempt}: provider ${provider.status}, relaying Retry-After ${wait}s`);
    return answer(res, provider.status, { 'retry-after': formatRetryAfter(wait) });
  }
  if (provider.status >= 300) {
    log(`job ${job.id} attempt ${job.attempt}: provider ${provider.status}`);
    return answer(res, 500);
  }
  log(`job ${job.id} attempt ${job.attempt}: done`);
  return answer(res, 200);
}

function answer(res, status, headers = {}) {
  res.writeHead(status, { ...headers, 'content-length': '0' });
  res.end();
}

// Start-up diagnostic: warn about queues that deliver here in ack mode (their
// jobs would wait for an ack this worker never sends).
async function checkQueues() {
  try {
    const headers = SIMPLEQ_API_KEY ? { authorization: `Bearer ${SIMPLEQ_API_KEY}` } : {};
    const res = await fetch(`${SIMPLEQ_URL}/v1/queues`, { headers, signal: AbortSignal.timeout(5000) });
    if (!res.ok) throw new Error(`${res.status} ${await res.text()}`);
    for (const q of (await res.json()).queues) {
      if (!q.webhookUrl.includes(`${LISTEN}/webhook`)) continue;
      if (q.mode !== 'standard') {
        log(`WARNING: queue '${q.name}' delivers here in ${q.mode} mode; this worker is for standard mode`);
      } else {
        log(`serving queue '${q.name}' (standard mode, concurrency ${q.concurrency})`);
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
  server.listen(port, host, () => log(`standard-mode worker listening on http://${LISTEN}/webhook`));
  process.on('SIGTERM', () => server.close(() => process.exit(0)));
}

main();

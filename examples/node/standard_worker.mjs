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

import { createHmac, timingSafeEqual } from 'node:crypto';
import { createServer } from 'node:http';

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

// Verify over the raw bytes BEFORE parsing, in constant time, against every
// accepted secret (two while rotating). Returns undefined when the delivery is
// authentic and fresh, otherwise why not. simpleqd signs two ways:
// webhook-signature (Standard Webhooks: an HMAC of "id.timestamp.body" under
// every active secret) and x-simpleq-signature (SimpleQ's: an HMAC of the body
// under the current secret only). The first also proves when the delivery was
// made, so a captured one cannot be replayed later: it is required, and decides
// alone (a receiver still holding only the old secret matches it during a
// rotation). x-simpleq-signature alone is accepted only with
// ALLOW_UNTIMESTAMPED=1 (SimpleQ's hosted service sends nothing else).
function verifyDelivery(raw, headers) {
  const std = headers['webhook-signature'];
  if (std) return verifyStandard(raw, headers['webhook-id'], headers['webhook-timestamp'], std);
  if (!ALLOW_UNTIMESTAMPED) return 'no webhook-signature (x-simpleq-signature alone could be a replay)';
  if (!verifySignature(raw, headers['x-simpleq-signature'])) return 'x-simpleq-signature does not match';
  return undefined;
}

// The HMAC key a secret stands for in webhook-signature, as simpleqd reads it:
// "whsec_" + padded standard base64 is the decoded bytes (the Standard Webhooks
// form); any other secret is its own bytes, whole.
function standardKey(secret) {
  const rest = secret.startsWith('whsec_') ? secret.slice('whsec_'.length) : '';
  // Buffer.from(…, 'base64') never throws, so check the form first.
  if (/^(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?$/.test(rest) && rest !== '') {
    return Buffer.from(rest, 'base64');
  }
  return Buffer.from(secret, 'utf8');
}

function verifyStandard(raw, id, timestamp, signature) {
  if (!id || !timestamp || !/^[0-9]+$/.test(timestamp)) {
    return 'webhook-id and webhook-timestamp (Unix seconds) are required';
  }
  const signed = Buffer.concat([Buffer.from(`${id}.${timestamp}.`), raw]);
  const wants = SECRETS.map((s) => createHmac('sha256', standardKey(s)).update(signed).digest());
  let ok = false;
  for (const entry of signature.split(' ')) {
    const [version, sig] = entry.split(',');
    if (version !== 'v1' || !sig) continue; // another scheme (v1a): not ours to check
    const got = Buffer.from(sig, 'base64');
    for (const want of wants) ok = (got.length === want.length && timingSafeEqual(got, want)) || ok;
  }
  if (!ok) return 'webhook-signature does not match';
  // Checked after the signature, so this means a genuine but stale delivery.
  if (Math.abs(Date.now() / 1000 - Number(timestamp)) > TOLERANCE) {
    return `webhook-timestamp more than ${TOLERANCE}s from this clock (a replay, or a clock that is off)`;
  }
  return undefined;
}

// x-simpleq-signature is sha256=<hex HMAC-SHA256 of the raw body>, keyed with
// the secret's bytes as they are.
function verifySignature(raw, header) {
  if (typeof header !== 'string' || !header.toLowerCase().startsWith('sha256=')) return false;
  const got = Buffer.from(header.slice('sha256='.length).trim().toLowerCase());
  let ok = false;
  for (const secret of SECRETS) {
    const want = Buffer.from(createHmac('sha256', secret).update(raw).digest('hex'));
    ok = (want.length === got.length && timingSafeEqual(want, got)) || ok;
  }
  return ok;
}

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
  const why = verifyDelivery(raw, req.headers);
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

#!/usr/bin/env node
// A webhook that verifies simpleqd's deliveries with the Standard Webhooks
// specification's own TypeScript library (npm "standardwebhooks"), run by
// test/standardwebhooks_test.go. Nothing here re-implements the scheme: the
// point is that a receiver using that library, as its README shows, accepts
// simpleqd's headers.
//
// Environment:
//   LISTEN   host:port to listen on
//   QUEUES   JSON {"<queue>": [{"secret": "...", "format": "whsec" | "raw"}, ...]}: the
//            secrets each queue's deliveries must verify with, each on its own.
//            "whsec" secrets are given to the library as they are (it strips
//            whsec_ and base64-decodes); "raw" ones as their UTF-8 bytes with
//            {format: "raw"}, which is how simpleqd uses any secret that is not
//            whsec_<base64>.
//
// POST /hooks/<queue>: verifies the delivery with every secret of the queue,
// each alone; answers 200 when all of them verify it, 401 otherwise (with the
// library's messages), or 500 on a first attempt whose payload asks for
// {"failFirst": true}, so a retry shows a new webhook-id.
// GET /results: every delivery seen, as JSON.

import { createServer } from 'node:http';
import { Webhook } from 'standardwebhooks';

const LISTEN = process.env.LISTEN || '127.0.0.1:9100';
const QUEUES = JSON.parse(process.env.QUEUES || '{}');
const results = [];

const verifiers = Object.fromEntries(
  Object.entries(QUEUES).map(([queue, secrets]) => [
    queue,
    secrets.map(({ secret, format }) =>
      format === 'raw' ? new Webhook(Buffer.from(secret, 'utf8'), { format: 'raw' }) : new Webhook(secret),
    ),
  ]),
);

async function handle(req, res) {
  if (req.method === 'GET' && req.url === '/results') {
    res.writeHead(200, { 'content-type': 'application/json' });
    return res.end(JSON.stringify(results));
  }
  const queue = req.method === 'POST' && req.url.startsWith('/hooks/') ? req.url.slice('/hooks/'.length) : '';
  if (!verifiers[queue]) {
    res.writeHead(404);
    return res.end();
  }
  const chunks = [];
  for await (const chunk of req) chunks.push(chunk);
  const raw = Buffer.concat(chunks);
  const verdicts = verifiers[queue].map((wh) => {
    try {
      wh.verify(raw, req.headers);
      return 'ok';
    } catch (err) {
      return `${err.name}: ${err.message}`;
    }
  });
  const ok = verdicts.every((v) => v === 'ok');
  results.push({
    queue,
    id: req.headers['webhook-id'] ?? null,
    timestamp: req.headers['webhook-timestamp'] ?? null,
    signature: req.headers['webhook-signature'] ?? null,
    verdicts,
  });
  let status = ok ? 200 : 401;
  if (ok) {
    const job = JSON.parse(raw.toString('utf8'));
    if (job.payload.failFirst && job.attempt === 1) status = 500;
  }
  res.writeHead(status, { 'content-type': 'text/plain' });
  res.end(ok ? '' : verdicts.join('; '));
}

const [host, port] = [LISTEN.slice(0, LISTEN.lastIndexOf(':')), Number(LISTEN.slice(LISTEN.lastIndexOf(':') + 1))];
const server = createServer((req, res) => {
  handle(req, res).catch((err) => {
    res.writeHead(500);
    res.end(String(err));
  });
});
server.listen(port, host, () => console.log(`standardwebhooks verifier listening on http://${LISTEN}`));
process.on('SIGTERM', () => server.close(() => process.exit(0)));

// The delivery workload on BullMQ, so that simpleqd's bench
// (go run ./bench -only compare) measures BullMQ and simpleqd on the same
// machine, against the same Redis and the same no-op webhook, minutes apart.
//
//   node bench.mjs enqueue --redis 127.0.0.1:6379 --n 20000 --payload 200
//   node bench.mjs work --redis 127.0.0.1:6379 --webhook http://127.0.0.1:8080/ --concurrency 50
//
// enqueue adds n jobs (addBulk, 1,000 at a time) and exits. work runs a
// Worker whose processor POSTs each job's data to the webhook over a
// keep-alive agent (what a BullMQ user writes), prints "started" once the
// worker runs, and stops on SIGTERM or SIGINT. BullMQ's defaults are kept
// otherwise (completed jobs are kept, as BullMQ does unless told).
import http from 'node:http';
import { Queue, Worker } from 'bullmq';
import IORedis from 'ioredis';

const args = process.argv.slice(2);
const mode = args[0];
const opt = (name, def) => {
  const i = args.indexOf('--' + name);
  return i >= 0 ? args[i + 1] : def;
};
const [host, port] = opt('redis', '127.0.0.1:6379').split(':');
// BullMQ 6 takes ioredis as an optional peer and, under ESM, a client
// instance rather than connection options.
const connect = () => new IORedis({ host, port: Number(port), maxRetriesPerRequest: null });
const queueName = 'bench';

async function enqueue() {
  const n = Number(opt('n', '20000'));
  const size = Number(opt('payload', '200'));
  const data = { data: 'x'.repeat(Math.max(size - '{"data":""}'.length, 0)) };
  const connection = connect();
  const queue = new Queue(queueName, { connection });
  for (let i = 0; i < n; i += 1000) {
    const jobs = [];
    for (let j = i; j < Math.min(i + 1000, n); j++) jobs.push({ name: 'deliver', data });
    await queue.addBulk(jobs);
  }
  await queue.close();
  await connection.quit();
}

async function work() {
  const url = new URL(opt('webhook', ''));
  const concurrency = Number(opt('concurrency', '50'));
  const agent = new http.Agent({ keepAlive: true, maxSockets: concurrency * 2 });
  const post = (body) => new Promise((resolve, reject) => {
    const req = http.request({
      host: url.hostname, port: url.port, path: url.pathname, method: 'POST', agent,
      headers: { 'Content-Type': 'application/json', 'Content-Length': Buffer.byteLength(body) },
    }, (res) => {
      res.resume();
      res.on('end', () => (res.statusCode >= 200 && res.statusCode < 300
        ? resolve() : reject(new Error('webhook answered ' + res.statusCode))));
    });
    req.on('error', reject);
    req.end(body);
  });
  const worker = new Worker(queueName, async (job) => post(JSON.stringify(job.data)),
    { connection: connect(), concurrency });
  await worker.waitUntilReady();
  console.log('started');
  const stop = async () => { await worker.close(); process.exit(0); };
  process.on('SIGTERM', stop);
  process.on('SIGINT', stop);
}

if (mode === 'enqueue') await enqueue();
else if (mode === 'work') await work();
else { console.error('usage: node bench.mjs enqueue|work [--redis host:port] ...'); process.exit(2); }

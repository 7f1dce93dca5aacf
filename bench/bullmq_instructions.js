'use strict';
// BullMQ's side of bench/instructions.py: one phase against a Redis run under callgrind.
// usage: node bench/bullmq_instructions.js HARNESS_DIR PORT CALLGRIND_PID N PHASE
// PHASE is "enqueue" (queue.add one by one) or "drain_c<C>" (N jobs added in bulk, then one
// Worker of concurrency C drains them). The Redis is flushed first; its callgrind counters
// are zeroed once the jobs wait; the caller dumps them when this exits. Prints the Redis
// commands per job of the phase.
const path = require('path');
const { execFileSync } = require('child_process');
const { createRequire } = require('module');

const [home, port, pid, n, phase] = process.argv.slice(2);
const req = createRequire(path.join(home, 'node_bullmq', 'package.json'));
const { Queue, Worker } = req('bullmq');
const IORedis = req('ioredis');
const connection = { host: '127.0.0.1', port: Number(port) };
const N = Number(n);

async function commands(client) {
  const text = await client.info('commandstats');
  return [...text.matchAll(/calls=(\d+)/g)].reduce((a, m) => a + Number(m[1]), 0);
}

async function drained(q, conc) {
  let left = N;
  let done;
  const finished = new Promise((resolve) => { done = resolve; });
  const w = new Worker('bench', async () => { if (--left === 0) done(); }, { connection, concurrency: conc });
  await finished;
  while ((await q.getCompletedCount()) < N) await new Promise((r) => setTimeout(r, 10));
  return w;
}

(async () => {
  const client = new IORedis(connection);
  await client.flushall();
  const q = new Queue('bench', { connection });
  await q.waitUntilReady();
  const job = (i) => ({ name: 'noop', data: { i, t: 1795474947.069 } });
  let w = null;
  if (phase === 'enqueue') {
    await q.add('noop', { i: -1 }); // the scripts loaded, outside the count
    await client.del('bull:bench:wait');
  } else {
    for (let s = 0; s < N; s += 500) {
      const items = [];
      for (let i = s; i < Math.min(N, s + 500); i++) items.push(job(i));
      await q.addBulk(items);
    }
  }
  execFileSync('callgrind_control', ['-z', pid]);
  const before = await commands(client);
  if (phase === 'enqueue') {
    for (let i = 0; i < N; i++) await q.add('noop', job(i).data);
  } else {
    w = await drained(q, Number(phase.replace('drain_c', '')));
  }
  const after = await commands(client);
  if (w) await w.close();
  await q.close();
  client.disconnect();
  console.log((after - before) / N);
  process.exit(0);
})().catch((e) => { console.error(e); process.exit(1); });

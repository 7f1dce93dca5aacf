'use strict';
// BullMQ's side of bench/async_enqueue.py: N jobs added with queue.add, C at a time (C=1: one
// after another), into a flushed Redis. Prints one JSON line: the seconds it took and the CPU
// seconds this process used (user + system).
// usage: node bench/bullmq_add.js HARNESS_DIR PORT N C
const path = require('path');
const { createRequire } = require('module');

const [home, port, n, c] = process.argv.slice(2);
const req = createRequire(path.join(home, 'node_bullmq', 'package.json'));
const { Queue } = req('bullmq');
const IORedis = req('ioredis');
const connection = { host: '127.0.0.1', port: Number(port) };
const N = Number(n);
const C = Number(c);

(async () => {
  const client = new IORedis(connection);
  await client.flushall();
  const q = new Queue('bench', { connection });
  await q.waitUntilReady();
  await q.add('noop', { i: -1, t: 0 }); // warm: scripts loaded, connection up
  const cpu0 = process.cpuUsage();
  const t0 = process.hrtime.bigint();
  let next = 0;
  async function lane() {
    while (next < N) {
      const i = next++;
      await q.add('noop', { i, t: 1795474947.069 });
    }
  }
  await Promise.all(Array.from({ length: C }, lane));
  const seconds = Number(process.hrtime.bigint() - t0) / 1e9;
  const cpu = process.cpuUsage(cpu0);
  console.log(JSON.stringify({ seconds, cpu: (cpu.user + cpu.system) / 1e6 }));
  await q.close();
  await client.quit();
})().catch((e) => { console.error(e); process.exit(1); });

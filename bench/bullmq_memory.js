// Redis memory per waiting BullMQ job: used_memory before and after adding N small jobs in
// bulk (the same data as bench/records_cost.py's plain jobs), on an empty Redis.
// usage: NODE_PATH=<dir with bullmq> node bench/bullmq_memory.js REDIS_PORT N
const { Queue } = require("bullmq");
const IORedis = require("ioredis");

async function used(r) {
  const info = await r.info("memory");
  return Number(/used_memory:(\d+)/.exec(info)[1]);
}

(async () => {
  const port = Number(process.argv[2]);
  const n = Number(process.argv[3] || 100000);
  const r = new IORedis({ port });
  await r.flushall();
  const queue = new Queue("bench", { connection: { port } });
  await queue.waitUntilReady();
  const before = await used(r);
  for (let i = 0; i < n; i += 1000) {
    const jobs = [];
    for (let j = i; j < Math.min(i + 1000, n); j++) {
      jobs.push({ name: "bench", data: { i: j, t: 1795474947.069 } });
    }
    await queue.addBulk(jobs);
  }
  const after = await used(r);
  console.log(JSON.stringify({ system: "bullmq", jobs: n, bytes_per_job: (after - before) / n }));
  await queue.close();
  await r.quit();
})();

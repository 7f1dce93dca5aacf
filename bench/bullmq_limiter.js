// BullMQ's drain with and without its rate limiter (set too high to bind, as
// bench/limits_drain.py sets ours): N small jobs added in bulk, one Worker at concurrency C,
// jobs per second and Redis commands per job, interleaved rounds, medians.
// usage: NODE_PATH=<dir with bullmq> node bench/bullmq_limiter.js REDIS_PORT [N] [C,C] [ROUNDS]
const { Queue, Worker } = require("bullmq");
const IORedis = require("ioredis");

async function commands(r) {
  const text = await r.info("commandstats");
  let total = 0;
  for (const m of text.matchAll(/calls=(\d+)/g)) total += Number(m[1]);
  return total;
}

async function drain(port, n, conc, limited) {
  const r = new IORedis({ port });
  await r.flushall();
  const queue = new Queue("bench", { connection: { port } });
  await queue.waitUntilReady();
  for (let i = 0; i < n; i += 1000) {
    const jobs = [];
    for (let j = i; j < Math.min(i + 1000, n); j++) {
      jobs.push({ name: "bench", data: { i: j, t: 1795474947.069 } });
    }
    await queue.addBulk(jobs);
  }
  await r.config("RESETSTAT");
  const before = await commands(r);
  const began = process.hrtime.bigint();
  let left = n;
  let finish;
  const done = new Promise((resolve) => (finish = resolve));
  const options = { connection: { port }, concurrency: conc };
  if (limited) options.limiter = { max: 1e9, duration: 1000 };
  const worker = new Worker("bench", async () => null, options);
  worker.on("completed", () => {
    left -= 1;
    if (left === 0) finish();
  });
  await done;
  const took = Number(process.hrtime.bigint() - began) / 1e9;
  const perJob = ((await commands(r)) - before) / n;
  await worker.close();
  await queue.close();
  await r.quit();
  return [n / took, perJob];
}

const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];

(async () => {
  const port = Number(process.argv[2]);
  const n = Number(process.argv[3] || 20000);
  const concs = (process.argv[4] || "1,16").split(",").map(Number);
  const rounds = Number(process.argv[5] || 3);
  const got = {};
  for (let round = 0; round < rounds; round++) {
    for (const conc of concs) {
      const kinds = round % 2 ? ["limiter", "plain"] : ["plain", "limiter"];
      for (const kind of kinds) {
        const key = `${kind}:${conc}`;
        (got[key] = got[key] || []).push(await drain(port, n, conc, kind === "limiter"));
      }
    }
  }
  for (const [key, runs] of Object.entries(got)) {
    const [kind, conc] = key.split(":");
    console.log(
      JSON.stringify({
        system: "bullmq",
        kind,
        conc: Number(conc),
        jobs_per_s: Math.round(median(runs.map((x) => x[0]))),
        commands_per_job: Math.round(median(runs.map((x) => x[1])) * 100) / 100,
        runs: runs.map((x) => Math.round(x[0])),
      })
    );
  }
})();

'use strict';
// BullMQ's side of the several-process drain: the shared harness's BullMQ driver, with its
// worker side run as P Node processes of one Worker each (concurrency c in each), the way
// BullMQ is scaled out. Reported as system "bullmq_pP", beside kue_core_pP
// (KUE_BENCH_PROCESSES=P bench/bench_kue_core.py).
// usage (from the harness's directory, BENCH_HOME, default /tmp/kue-bench):
//   BULLMQ_PROCESSES=4 node /path/to/bench/bullmq_processes.js --workloads w2_drain --conc 16
// The first worker process starts P - 1 more and stops them when it is stopped; all of them
// append to the harness's record file (one O_APPEND write per job), as one worker would.
const path = require('path');
const { spawn } = require('child_process');
const { createRequire } = require('module');

const HOME = process.env.BENCH_HOME || '/tmp/kue-bench';
const req = createRequire(path.join(HOME, 'node_bullmq', 'package.json'));
const { Worker } = req('bullmq');
const common = require(path.join(HOME, 'common.js'));

const P = Number(process.env.BULLMQ_PROCESSES || 4);
const CHILD = process.env.BULLMQ_CHILD === '1';
const QNAME = 'bench';

// The harness's bench_bullmq.js exports nothing: this adapter is its own, with P worker processes.
const adapter = {
  system: `bullmq_p${P}`,
  defaultConc: 1,
  bulkChunk: 1000,
  concModel: (c) => `${P} processes, Worker concurrency=${c} each (async)`,
  async setup(args) {
    const o = common.parseRedisUrl(args.redis);
    this.connection = { host: o.host, port: o.port, db: o.db, password: o.password };
    if (args.role === 'main') {
      const { Queue } = req('bullmq');
      this.queue = new Queue(QNAME, { connection: this.connection });
      await this.queue.waitUntilReady();
    }
  },
  async teardown() { await this.queue.close(); },
  enqueue(i, t) { return this.queue.add('noop', { i, t }); },
  enqueueBulk(items) {
    return this.queue.addBulk(items.map(([i, t]) => ({ name: 'noop', data: { i, t } })));
  },
  enqueueDelayed(i, due, delayS) {
    return this.queue.add('noop', { i, t: due }, { delay: Math.round(delayS * 1000) });
  },
  async runWorker(conc) {
    const children = [];
    if (!CHILD) {
      for (let k = 1; k < P; k++) {
        children.push(spawn(process.execPath, process.argv.slice(1), {
          env: { ...process.env, BULLMQ_CHILD: '1' }, stdio: 'inherit',
        }));
      }
    }
    const w = new Worker(QNAME, async (job) => { common.record(job.data.t); },
      { connection: this.connection, concurrency: conc });
    w.on('error', (e) => console.error('worker error', e));
    const stop = async () => {
      for (const c of children) { try { c.kill('SIGTERM'); } catch (e) { /* gone */ } }
      try { await w.close(); } finally { process.exit(0); }
    };
    process.on('SIGTERM', stop);
    process.on('SIGINT', stop);
  },
};

if (require.main === module) {
  common.main(adapter).catch((e) => { console.error(e); process.exit(1); });
}

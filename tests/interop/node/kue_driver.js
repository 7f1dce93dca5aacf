'use strict';
// A Node Kue 0.11.6 process that the Python interoperability tests (tests/interop) drive.
//
//   node kue_driver.js --host 127.0.0.1 --port 6379 [--db 0] [--socket PATH] --prefix q
//   (a Redis password, if any, in the environment: KUE_INTEROP_REDIS_PASSWORD)
//
// It reads one JSON command per line on stdin, {"req": n, "cmd": "...", ...}, and writes one
// JSON object per line on stdout: {"event": "reply", "req": n, ...} (or {"event": "error",
// "req": n, "message": ...}) for each command, and, as they happen, the events Kue gives it:
//   {"event": "<job event>", "scope": "job", "id": id, "args": [...]}      job.on(...)
//   {"event": "job <event>", "scope": "queue", "id": id, "args": [...]}   queue.on(...)
//   {"event": "processing", "scope": "worker", "id": id, "job": {...}}   a handler started
// It exits when stdin closes or on {"cmd": "quit"}.
//
// Commands:
//   create  {type, data, priority?, attempts?, delay?, backoff?}: queue.create(...).save();
//           the job's events are reported                                -> {id}
//   get     {id}: kue.Job.get(id)                                        -> {job: job.toJSON()}
//   log     {id}: kue.Job.log(id)                                        -> {lines}
//   listen  {}: report every queue-level event ("job complete", ...)     -> {}
//   process {type, concurrency?, progress?: [done, total, data], log?: [fmt, ...args],
//            result?, fail?: message, hold?: bool}: queue.process(type, n, handler); the
//           handler reports progress, logs, then calls done (with an Error when `fail` is
//           given), or waits for `release` when `hold` is set               -> {}
//   release {id, result?, fail?}: call done for a held job                   -> {}
//   serve   {}: kue.app (Kue's JSON API and UI) on a free loopback port     -> {port}
//   quit    {}: queue.shutdown(), then exit 0

const kue = require('kue');

const JOB_EVENTS = ['enqueue', 'start', 'promotion', 'progress', 'failed attempt', 'failed',
  'complete', 'remove', 'error'];

function options(argv) {
  const out = {};
  for (let i = 2; i < argv.length; i += 2) {
    if (!argv[i].startsWith('--') || i + 1 >= argv.length) {
      throw new Error('usage: kue_driver.js --host H --port P [--db N] [--socket PATH] --prefix X');
    }
    out[argv[i].slice(2)] = argv[i + 1];
  }
  if (!out.prefix) throw new Error('--prefix is required');
  const redis = out.socket ? { socket: out.socket } : {
    host: out.host || '127.0.0.1', port: Number(out.port || 6379), db: Number(out.db || 0),
  };
  if (process.env.KUE_INTEROP_REDIS_PASSWORD) redis.auth = process.env.KUE_INTEROP_REDIS_PASSWORD;
  return { prefix: out.prefix, redis };
}

function emit(message) {
  process.stdout.write(JSON.stringify(message) + '\n');
}

const queue = kue.createQueue(options(process.argv));
queue.on('error', (err) => emit({ event: 'queue error', message: String(err && err.message) }));

const held = new Map(); // job id -> done callback of a held job
let listening = false;

function reportJobEvents(job) {
  for (const name of JOB_EVENTS) {
    job.on(name, (...args) => emit({ event: name, scope: 'job', id: job.id, args }));
  }
}

function handler(spec) {
  return (job, done) => {
    emit({ event: 'processing', scope: 'worker', id: job.id, job: job.toJSON() });
    if (spec.progress) job.progress(...spec.progress);
    if (spec.log) job.log(...spec.log);
    if (spec.hold) {
      held.set(String(job.id), done);
    } else if (spec.fail) {
      done(new Error(spec.fail));
    } else {
      done(null, spec.result);
    }
  };
}

const commands = {
  create(c, reply) {
    const job = queue.create(c.type, c.data);
    if (c.priority !== undefined) job.priority(c.priority);
    if (c.attempts !== undefined) job.attempts(c.attempts);
    if (c.delay !== undefined) job.delay(c.delay);
    if (c.backoff !== undefined) job.backoff(c.backoff);
    reportJobEvents(job);
    job.save((err) => reply(err, { id: job.id }));
  },
  get(c, reply) {
    kue.Job.get(c.id, (err, job) => reply(err, err ? null : { job: job.toJSON() }));
  },
  log(c, reply) {
    kue.Job.log(c.id, (err, lines) => reply(err, { lines }));
  },
  listen(c, reply) {
    if (!listening) {
      listening = true;
      for (const name of JOB_EVENTS) {
        queue.on('job ' + name, (id, ...args) => {
          emit({ event: 'job ' + name, scope: 'queue', id, args });
        });
      }
    }
    reply(null, {});
  },
  process(c, reply) {
    queue.process(c.type, c.concurrency || 1, handler(c));
    reply(null, {});
  },
  release(c, reply) {
    const done = held.get(String(c.id));
    if (!done) return reply(new Error('no held job ' + c.id));
    held.delete(String(c.id));
    if (c.fail) done(new Error(c.fail));
    else done(null, c.result);
    reply(null, {});
  },
  serve(c, reply) {
    const server = kue.app.listen(0, '127.0.0.1', () => reply(null, { port: server.address().port }));
    server.on('error', (err) => reply(err));
  },
  quit(c, reply) {
    reply(null, {});
    quit();
  },
};

let quitting = false;
function quit() {
  if (quitting) return;
  quitting = true;
  // Kue fails the jobs its workers still hold after the timeout; the tests hold none by then.
  const force = setTimeout(() => process.exit(0), 3000);
  force.unref();
  queue.shutdown(1000, () => process.exit(0));
}

function run(line) {
  let c;
  try {
    c = JSON.parse(line);
  } catch (e) {
    emit({ event: 'error', message: 'not JSON: ' + line });
    return;
  }
  const reply = (err, body) => {
    if (err) emit({ event: 'error', req: c.req, message: String(err.message || err) });
    else emit(Object.assign({ event: 'reply', req: c.req }, body));
  };
  const command = commands[c.cmd];
  if (!command) return reply(new Error('unknown command ' + c.cmd));
  try {
    command(c, reply);
  } catch (e) {
    reply(e);
  }
}

let buffered = '';
process.stdin.setEncoding('utf8');
process.stdin.on('data', (chunk) => {
  buffered += chunk;
  let nl;
  while ((nl = buffered.indexOf('\n')) >= 0) {
    const line = buffered.slice(0, nl).trim();
    buffered = buffered.slice(nl + 1);
    if (line) run(line);
  }
});
process.stdin.on('end', quit);

// Ready once Kue's subscription to <prefix>:events is confirmed: no event is missed after this.
kue.redis.pubsubClient().once('subscribe', () => emit({ event: 'ready', pid: process.pid }));

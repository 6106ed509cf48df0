'use strict';
// What a `kill -9` keeps (issue 45, docs/operations.md "Durable keys: the append-only
// log"): a fencing-token counter kept with INCR, a list used as a queue, and a BullMQ
// queue's waiting jobs, on a node of our own started in a temporary directory, killed
// with SIGKILL and started again on the same directory and port.
//
// redlockd runs with its default flags (declared new with `redlockd init --dir`, as an
// operator would): keys with no TTL are logged and fsynced before the reply. Real Redis
// keeps nothing across a crash by default; it runs with `appendonly yes appendfsync
// always`, the setting a Redis user who needs this chooses.
const { test, after } = require('node:test');
const assert = require('node:assert/strict');
const { spawn, execFileSync } = require('node:child_process');
const fs = require('node:fs');
const net = require('node:net');
const os = require('node:os');
const path = require('node:path');
const Redis = require('ioredis');
const { Queue, Worker } = require('bullmq');
const { KIND, within } = require('./common');

const BIN = process.env.INTEROP_SERVER_BIN;
const LOG_DIR = process.env.INTEROP_LOG_DIR || os.tmpdir();
if (!BIN) throw new Error('INTEROP_SERVER_BIN is not set (run through tests/interop/run.sh)');

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

function freePort() {
  return new Promise((resolve, reject) => {
    const s = net.createServer();
    s.once('error', reject);
    s.listen(0, '127.0.0.1', () => {
      const { port } = s.address();
      s.close(() => resolve(port));
    });
  });
}

// One server process on `port` with its data in `dir`; stop() is bounded and idempotent.
class OwnNode {
  constructor(port, dir) {
    this.port = port;
    this.dir = dir;
    this.proc = null;
  }

  args() {
    if (KIND === 'redlockd') return ['--bind', '127.0.0.1', '--port', String(this.port), '--dir', this.dir];
    return ['--bind', '127.0.0.1', '--port', String(this.port), '--dir', this.dir, '--save', '',
      '--appendonly', 'yes', '--appendfsync', 'always', '--daemonize', 'no'];
  }

  async start() {
    const log = fs.openSync(path.join(LOG_DIR, `crash-node-${this.port}.log`), 'a');
    this.proc = spawn(BIN, this.args(), { stdio: ['ignore', log, log], env: { ...process.env, NO_COLOR: '1' } });
    fs.closeSync(log);
    // run.sh stops anything listed here still running when it exits
    fs.appendFileSync(path.join(LOG_DIR, 'extra-pids'), `${this.proc.pid}\n`);
    const exited = new Promise((r) => this.proc.once('exit', r));
    this.exited = exited;
    const deadline = Date.now() + 15000;
    for (;;) {
      const c = new Redis({ port: this.port, host: '127.0.0.1', lazyConnect: true, maxRetriesPerRequest: 0, retryStrategy: null });
      c.on('error', () => {});
      try {
        await c.connect();
        if ((await c.ping()) === 'PONG') return;
      } catch (_) {
        // not listening yet
      } finally {
        c.disconnect();
      }
      if (this.proc.exitCode !== null) throw new Error(`server on ${this.port} exited with ${this.proc.exitCode}`);
      if (Date.now() > deadline) throw new Error(`server on ${this.port} did not answer PING within 15 s`);
      await sleep(5);
    }
  }

  async kill9() {
    this.proc.kill('SIGKILL');
    await within(10000, this.exited, 'the killed server exits');
  }

  async stop() {
    if (!this.proc || this.proc.exitCode !== null || this.proc.signalCode !== null) return;
    this.proc.kill('SIGTERM');
    try {
      await within(5000, this.exited, 'SIGTERM');
    } catch (_) {
      this.proc.kill('SIGKILL');
      await within(5000, this.exited, 'SIGKILL');
    }
  }
}

// redlockd's restart fence refuses writes with TRYAGAIN for as long as the memory-only
// keys it may have granted could live (here well under a second: a short margin); a
// client retries, as a Redlock client would. Bounded by the fence's 61 s ceiling.
async function afterFence(write) {
  const deadline = Date.now() + 62000;
  for (;;) {
    try {
      return await write();
    } catch (e) {
      if (KIND !== 'redlockd' || !String(e.message).startsWith('TRYAGAIN') || Date.now() > deadline) throw e;
      await sleep(20);
    }
  }
}

const owned = [];
after(async () => {
  for (const n of owned) await n.stop();
});

async function freshNode() {
  const dir = fs.mkdtempSync(path.join(LOG_DIR, 'crash-dir-'));
  if (KIND === 'redlockd') execFileSync(BIN, ['init', '--dir', dir], { stdio: 'ignore' });
  const node = new OwnNode(await freePort(), dir);
  owned.push(node);
  await node.start();
  return node;
}

test('kill -9: an INCR token counter continues at 4, a queue list and a BullMQ queue keep their jobs', async () => {
  const node = await freshNode();
  const connection = { host: '127.0.0.1', port: node.port, maxRetriesPerRequest: null };
  let c = new Redis(connection);
  assert.deepEqual([await c.incr('token'), await c.incr('token'), await c.incr('token')], [1, 2, 3]);
  assert.equal(await c.rpush('queue', 'job1', 'job2'), 2);
  let queue = new Queue('crash', { connection });
  const added = await within(10000, Promise.all([1, 2, 3].map((n) => queue.add('work', { n }))), 'queue.add x3');
  assert.equal(await queue.getWaitingCount(), 3);
  // Every reply above came back, so each write is acknowledged. The clients go away
  // first (a client of a dead server only retries), then the crash.
  await within(10000, queue.close(), 'queue.close');
  c.disconnect();
  await node.kill9();

  await node.start();
  c = new Redis(connection);
  try {
    assert.equal(await afterFence(() => c.incr('token')), 4, 'the token counter did not go backwards');
    assert.deepEqual(await c.lrange('queue', 0, -1), ['job1', 'job2']);
    queue = new Queue('crash', { connection });
    assert.equal(await queue.getWaitingCount(), 3, 'the waiting jobs are still queued');
    for (const job of added) {
      const back = await queue.getJob(job.id);
      assert.deepEqual(back.data, job.data);
    }
    // And the restarted queue works: a worker takes and completes every job.
    const done = [];
    let allDone;
    const allDoneP = new Promise((r) => { allDone = r; });
    const worker = new Worker('crash', async (job) => {
      done.push(job.data.n);
      if (done.length === 3) allDone();
      return job.data.n;
    }, { connection });
    try {
      await within(20000, allDoneP, 'the worker takes the three jobs after the restart');
      assert.deepEqual(done.sort(), [1, 2, 3]);
    } finally {
      await within(10000, worker.close(), 'worker.close');
    }
    await within(10000, queue.close(), 'queue.close');
  } finally {
    c.disconnect();
    await node.stop();
  }
});

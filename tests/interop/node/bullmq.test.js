'use strict';
// BullMQ 6 (over ioredis), its default settings: Queue.add, a Worker that processes
// jobs under its lock (bull:<queue>:<id>:lock, extended while the job runs), job
// events through a stream (XADD by the scripts, XREAD BLOCK by QueueEvents), and a
// stalled job retaken by another worker once its lock has expired.
//
// It runs on the battery's default-flag nodes (real clock, default max-ttl).
// Timings shortened, only where the stalled case needs them: the crashed worker's
// lockDuration (30 s by default) is 1 s and it skips lock renewal (a dead worker does
// not renew), and both workers' stalledInterval (30 s; the first check also throttles
// the next ones for that long) is 300 ms.
const { test, before, after } = require('node:test');
const assert = require('node:assert/strict');
const Redis = require('ioredis');
const { Queue, Worker, QueueEvents } = require('bullmq');
const { DEFAULT_NODES, unique, within } = require('./common');

const connection = { host: DEFAULT_NODES[0].host, port: DEFAULT_NODES[0].port };
let admin;

before(async () => {
  admin = new Redis(connection);
  await within(10000, admin.ping(), 'PING');
});

after(async () => {
  await within(10000, admin.quit(), 'QUIT');
});

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

test('queue.add, a worker processes each job under its lock, events arrive by stream', async () => {
  const name = unique('bull').replace(/:/g, '-');
  const queue = new Queue(name, { connection });
  const events = new QueueEvents(name, { connection });
  await within(10000, events.waitUntilReady(), 'QueueEvents ready');
  const seen = [];
  const worker = new Worker(
    name,
    async (job) => {
      // While it runs, the job's lock holds the worker's token, with a TTL.
      const lockKey = `bull:${name}:${job.id}:lock`;
      const [token, pttl] = await Promise.all([admin.get(lockKey), admin.pttl(lockKey)]);
      seen.push({ id: job.id, token, pttl, lockToken: job.token });
      return job.data.n * 2;
    },
    { connection },
  );
  try {
    const done = new Map();
    const allDone = new Promise((resolve) => {
      events.on('completed', ({ jobId, returnvalue }) => {
        done.set(jobId, returnvalue);
        if (done.size === 3) resolve();
      });
    });
    const jobs = await within(10000, Promise.all([1, 2, 3].map((n) => queue.add('double', { n }))), 'queue.add x3');
    await within(20000, allDone, 'three completed events (XREAD BLOCK on the events stream)');
    for (const job of jobs) {
      assert.equal(String(done.get(job.id)), String(job.data.n * 2));
      const fresh = await queue.getJob(job.id);
      assert.equal(fresh.returnvalue, job.data.n * 2);
      assert.ok(fresh.finishedOn > 0);
    }
    assert.equal(seen.length, 3);
    for (const s of seen) {
      assert.equal(s.token, s.lockToken, `job ${s.id} ran under its worker's lock`);
      assert.ok(s.pttl > 0 && s.pttl <= 30000, `lock TTL ${s.pttl}`);
    }
    assert.equal(await queue.getCompletedCount(), 3);
    // The events stream holds the history (XADD ... MAXLEN ~ 10000 by default).
    const added = await admin.xrange(`bull:${name}:events`, '-', '+');
    assert.ok(added.some(([, fields]) => fields.includes('completed')), 'completed events in the stream');
  } finally {
    await within(10000, worker.close(), 'worker.close');
    await within(10000, events.close(), 'events.close');
    await within(10000, queue.obliterate({ force: true }), 'obliterate');
    await within(10000, queue.close(), 'queue.close');
  }
});

test('a stalled job is retaken by another worker after its lock expires', async () => {
  const name = unique('bullstall').replace(/:/g, '-');
  const queue = new Queue(name, { connection });
  let started;
  const startedP = new Promise((r) => { started = r; });
  // The first worker takes the job and "crashes": its processor never ends and its
  // lock is never extended (skipLockRenewal, as a dead process's would not be).
  const crashing = new Worker(
    name,
    async () => {
      started();
      await new Promise(() => {});
    },
    { connection, lockDuration: 1000, skipLockRenewal: true, stalledInterval: 300 },
  );
  const job = await within(10000, queue.add('work', { x: 1 }), 'queue.add');
  await within(10000, startedP, 'the first worker starts the job');
  const lockKey = `bull:${name}:${job.id}:lock`;
  assert.notEqual(await admin.get(lockKey), null, 'locked by the first worker');
  await within(10000, crashing.close(true), 'force close of the first worker');
  let retakenBy = null;
  const rescuer = new Worker(
    name,
    async (j) => {
      retakenBy = j.id;
      return 'rescued';
    },
    { connection, stalledInterval: 300 },
  );
  try {
    // The lock expires after 1 s; one stalled check marks the job, the next (300 ms
    // later) finds no lock and moves it back to wait, and the rescuer runs it.
    const deadline = Date.now() + 20000;
    let state = await queue.getJobState(job.id);
    while (state !== 'completed' && Date.now() < deadline) {
      await sleep(10); // BullMQ's stalled-job timers run on the wall clock
      state = await queue.getJobState(job.id);
    }
    assert.equal(state, 'completed', 'the stalled job was retaken and completed');
    assert.equal(retakenBy, job.id);
    const fresh = await queue.getJob(job.id);
    assert.equal(fresh.returnvalue, 'rescued');
    assert.ok(fresh.attemptsStarted >= 2 || fresh.stalledCounter >= 1, 'counted as stalled');
  } finally {
    await within(10000, rescuer.close(), 'rescuer.close');
    await within(10000, queue.obliterate({ force: true }), 'obliterate');
    await within(10000, queue.close(), 'queue.close');
  }
});

// A BullMQ queue and a stream with a consumer group, each in one slot of the 3-node
// redlockd cluster (cluster mode `map`, started by run.sh), moved live to another node
// with `redlockd slots move` (the binary named by INTEROP_REDLOCKD), over an ioredis
// Cluster with its defaults and one seed. BullMQ in a cluster needs every key of a
// queue in one slot: the queue's prefix is a hash tag (`{bull:moving}`), as BullMQ's
// docs say. With a move that sends no key, the counts, the jobs, the entries and the
// pending list on the new owner are missing and both cases fail.
const test = require('node:test');
const assert = require('node:assert');
const { execFileSync } = require('node:child_process');
const Redis = require('ioredis');
const keySlot = require('cluster-key-slot');
const { Queue, Worker } = require('bullmq');

const SEEDS = (process.env.INTEROP_CLUSTER_SEEDS || '').split(',').filter(Boolean);
const [HOST, PORT] = (SEEDS[1] || ':').split(':');
const REDLOCKD = process.env.INTEROP_REDLOCKD;

const within = (ms, p, what) => Promise.race([p, new Promise((_, rej) => setTimeout(() => rej(new Error(`${what}: no answer in ${ms} ms`)), ms).unref())]);

/** Moves `slot` from its owner (as `c` sees it) to another seed; returns [old, to, report]. */
async function moveSlot(c, slot) {
  assert.ok(REDLOCKD, 'INTEROP_REDLOCKD names the redlockd binary (run through run.sh)');
  const old = c.slots[slot][0];
  const to = SEEDS.find((s) => s !== old);
  const out = execFileSync(REDLOCKD, ['slots', 'move', '--slots', `${slot}`, '--to', to, '--seed', old], { encoding: 'utf8', timeout: 60000 });
  return [old, to, out];
}

const direct = (addr) => {
  const [host, port] = addr.split(':');
  return new Redis({ host, port: +port, retryStrategy: null, maxRetriesPerRequest: 0 });
};

test('a BullMQ queue in a moved slot keeps its jobs; a Worker completes them on the new owner', async () => {
  const connection = new Redis.Cluster([{ host: HOST, port: +PORT }]);
  const prefix = '{bull:moving}';
  const queue = new Queue('jobs', { connection, prefix });
  let worker;
  const nodes = [];
  try {
    const added = await within(15000, Promise.all([1, 2, 3, 4, 5].map((n) => queue.add('work', { n }))), 'queue.add x5');
    const later = await within(15000, queue.add('later', { n: 6 }, { delay: 600000 }), 'queue.add delayed');
    const before = await queue.getJobCounts('waiting', 'delayed', 'completed');
    assert.deepStrictEqual(before, { waiting: 5, delayed: 1, completed: 0 });
    const slot = keySlot(`${prefix}:jobs:wait`);
    const ownerC = direct(connection.slots[slot][0]);
    nodes.push(ownerC);
    const keysBefore = await ownerC.cluster('COUNTKEYSINSLOT', slot);
    assert.ok(keysBefore >= 7, `the queue's keys: ${keysBefore}`); // 6 job hashes, wait, delayed, meta, id, ...

    const [old, to, out] = await moveSlot(connection, slot);
    const oldC = ownerC;
    const toC = direct(to);
    nodes.push(toC);
    // Through the client (which follows MOVED): the counts and every job's data.
    assert.deepStrictEqual(await queue.getJobCounts('waiting', 'delayed', 'completed'), before);
    for (const job of [...added, later]) assert.deepStrictEqual((await queue.getJob(job.id))?.data, job.data);
    // Every key of the queue is on the new owner now, none on the old one.
    assert.strictEqual(await toC.cluster('COUNTKEYSINSLOT', slot), keysBefore);
    assert.strictEqual(await oldC.cluster('COUNTKEYSINSLOT', slot), 0);
    await assert.rejects(oldC.llen(`${prefix}:jobs:wait`), new RegExp(`^ReplyError: MOVED ${slot} ${to}$`));

    const done = [];
    let allDone;
    const allDoneP = new Promise((r) => { allDone = r; });
    worker = new Worker('jobs', async (job) => {
      done.push(job.data.n);
      if (done.length === 5) allDone();
      return job.data.n * 10;
    }, { connection, prefix });
    await within(20000, allDoneP, 'the worker takes the five jobs after the move');
    await within(10000, worker.close(), 'worker.close');
    worker = undefined;
    assert.deepStrictEqual(done.sort(), [1, 2, 3, 4, 5]);
    assert.deepStrictEqual(await queue.getJobCounts('waiting', 'delayed', 'completed'), { waiting: 0, delayed: 1, completed: 5 });
    for (const job of added) assert.strictEqual((await queue.getJob(job.id)).returnvalue, job.data.n * 10);
    // ... and it all happened on the new owner.
    assert.strictEqual(await toC.zcard(`${prefix}:jobs:completed`), 5);
    assert.strictEqual(await oldC.cluster('COUNTKEYSINSLOT', slot), 0);
    // The move's report, last: the clients' view above is what the case is about.
    assert.match(out, new RegExp(`moved slots ${slot} from ${old} to ${to} .*: ${keysBefore} keys`));
    await queue.obliterate({ force: true });
  } finally {
    if (worker) await worker.close(true);
    await queue.close();
    connection.disconnect();
    for (const n of nodes) n.disconnect();
  }
});

test('a stream in a moved slot keeps its entries, its consumer group and its pending entries', async () => {
  const c = new Redis.Cluster([{ host: HOST, port: +PORT }]);
  const nodes = [];
  const key = '{nr:moving-stream}:events';
  try {
    await c.del(key);
    for (let i = 1; i <= 4; i++) assert.strictEqual(await c.xadd(key, `${i}-1`, 'n', `${i}`), `${i}-1`);
    assert.strictEqual(await c.xgroup('CREATE', key, 'workers', '0'), 'OK');
    // c1 reads two entries and acknowledges the first: one pending, owned by c1.
    assert.deepStrictEqual(await c.xreadgroup('GROUP', 'workers', 'c1', 'COUNT', 2, 'STREAMS', key, '>'),
      [[key, [['1-1', ['n', '1']], ['2-1', ['n', '2']]]]]);
    assert.strictEqual(await c.xack(key, 'workers', '1-1'), 1);
    const slot = keySlot(key);
    const [owner] = c.slots[slot];
    const ownerC = direct(owner);
    nodes.push(ownerC);
    // Everything the stream's owner says about it, before the move.
    const full = await ownerC.xinfo('STREAM', key, 'FULL');
    const pending = await c.xpending(key, 'workers', '-', '+', 10);
    assert.strictEqual(pending.length, 1);
    assert.deepStrictEqual(pending[0].slice(0, 2), ['2-1', 'c1']);

    const [old, to, out] = await moveSlot(c, slot);
    assert.strictEqual(old, owner);
    const toC = direct(to);
    nodes.push(toC);
    await assert.rejects(ownerC.xlen(key), new RegExp(`^ReplyError: MOVED ${slot} ${to}$`));
    // The new owner says the same: entries, group, last delivered id, PEL with its
    // delivery time and count, consumers.
    assert.deepStrictEqual(await toC.xinfo('STREAM', key, 'FULL'), full);
    assert.deepStrictEqual((await c.xpending(key, 'workers', '-', '+', 10)).map((e) => [e[0], e[1], e[3]]), [['2-1', 'c1', 1]]);
    // The group goes on from where it was: c2 gets the two entries never delivered, and
    // claims c1's pending one.
    assert.deepStrictEqual(await c.xreadgroup('GROUP', 'workers', 'c2', 'STREAMS', key, '>'),
      [[key, [['3-1', ['n', '3']], ['4-1', ['n', '4']]]]]);
    assert.deepStrictEqual(await c.xclaim(key, 'workers', 'c2', 0, '2-1'), [['2-1', ['n', '2']]]);
    assert.strictEqual(await c.xack(key, 'workers', '2-1', '3-1', '4-1'), 3);
    assert.deepStrictEqual(await toC.xpending(key, 'workers'), [0, null, null, null]);
    assert.match(out, new RegExp(`moved slots ${slot} from ${old} to ${to} `));
    await c.del(key);
  } finally {
    c.disconnect();
    for (const n of nodes) n.disconnect();
  }
});

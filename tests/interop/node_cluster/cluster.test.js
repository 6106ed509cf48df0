// ioredis Cluster and node-redis createCluster with their defaults, given one seed
// address, against a 3-node redlockd cluster (cluster mode `map`, started by run.sh).
const test = require('node:test');
const assert = require('node:assert');
const Redis = require('ioredis');
const { createCluster } = require('redis');

const SEEDS = (process.env.INTEROP_CLUSTER_SEEDS || '').split(',').filter(Boolean);
const [HOST, PORT] = (SEEDS[1] || ':').split(':');

test('seeds are given', () => assert.strictEqual(SEEDS.length, 3));

test('ioredis Cluster: keys over every node, multi, CROSSSLOT', async () => {
  const c = new Redis.Cluster([{ host: HOST, port: +PORT }], { clusterRetryStrategy: () => null });
  try {
    for (let i = 0; i < 200; i++) assert.strictEqual(await c.set(`io:k${i}`, `${i}`, 'PX', 20000), 'OK');
    for (let i = 0; i < 200; i++) assert.strictEqual(await c.get(`io:k${i}`), `${i}`);
    assert.deepStrictEqual(c.nodes('master').map((n) => `${n.options.host}:${n.options.port}`).sort(), [...SEEDS].sort());
    assert.deepStrictEqual(await c.multi().set('{io}a', '1', 'PX', 10000).get('{io}a').exec(), [[null, 'OK'], [null, '1']]);
    await assert.rejects(c.eval('return 1', 2, 'a', 'b'), /^ReplyError: CROSSSLOT Keys in request don't hash to the same slot/);
  } finally {
    c.disconnect();
  }
});

test('node-redis createCluster: keys over every node, multi, CROSSSLOT', async () => {
  const c = createCluster({ rootNodes: [{ url: `redis://${HOST}:${PORT}` }] });
  await c.connect();
  try {
    for (let i = 0; i < 200; i++) assert.strictEqual(await c.set(`nr:k${i}`, `v${i}`, { PX: 20000 }), 'OK');
    for (let i = 0; i < 200; i++) assert.strictEqual(await c.get(`nr:k${i}`), `v${i}`);
    assert.strictEqual(c.masters.length, 3);
    assert.deepStrictEqual(await c.multi().set('{nr}a', '1').get('{nr}a').exec(), ['OK', '1']);
    await assert.rejects(c.sendCommand('a', false, ['EVAL', 'return 1', '2', 'a', 'b']), /CROSSSLOT Keys in request don't hash to the same slot/);
  } finally {
    await c.quit();
  }
});

// A lock held across a live move of its slot (`redlockd slots move`, the binary named
// by INTEROP_REDLOCKD), taken by node-redlock over one ioredis Cluster with their
// defaults: the holder extends and releases on the new owner, a rival's acquire fails
// until then, and a stream and a list of the slot arrive intact. Before the test that
// kills a cluster.
test('node-redlock over an ioredis Cluster: a lock held across a live slot move', async () => {
  const { default: Redlock, ExecutionError } = require('redlock');
  const { execFileSync } = require('node:child_process');
  const keySlot = require('cluster-key-slot');
  const redlockd = process.env.INTEROP_REDLOCKD;
  assert.ok(redlockd, 'INTEROP_REDLOCKD names the redlockd binary (run through run.sh)');
  const mine = new Redis.Cluster([{ host: HOST, port: +PORT }]);
  const theirs = new Redis.Cluster([{ host: HOST, port: +PORT }]);
  let direct;
  try {
    const a = new Redlock([mine]);
    const b = new Redlock([theirs], { retryCount: 0 });
    const lock = await a.acquire(['nr:moving'], 20000);
    assert.strictEqual(await mine.xadd('{nr:moving}:events', '1-1', 'e', 'started'), '1-1');
    assert.strictEqual(await mine.rpush('{nr:moving}:items', 'a', 'b'), 2);
    const slot = keySlot('nr:moving');
    const old = mine.slots[slot][0];
    const to = SEEDS.find((s) => s !== old);
    const out = execFileSync(redlockd, ['slots', 'move', '--slots', `${slot}`, '--to', to, '--seed', old], { encoding: 'utf8', timeout: 60000 });
    assert.match(out, new RegExp(`moved slots ${slot} from ${old} to ${to} .*: 3 keys`));
    const [host, port] = to.split(':');
    direct = new Redis({ host, port: +port });
    assert.strictEqual(await direct.get('nr:moving'), lock.value);
    const extended = await lock.extend(20000);
    assert.ok((await direct.pttl('nr:moving')) > 15000);
    await assert.rejects(b.acquire(['nr:moving'], 10000), ExecutionError);
    await extended.release();
    assert.strictEqual(await direct.exists('nr:moving'), 0);
    assert.deepStrictEqual(await mine.xrange('{nr:moving}:events', '-', '+'), [['1-1', ['e', 'started']]]);
    assert.deepStrictEqual(await mine.lrange('{nr:moving}:items', 0, -1), ['a', 'b']);
    const again = await b.acquire(['nr:moving'], 10000);
    await again.release();
    await mine.del('{nr:moving}:events', '{nr:moving}:items');
  } finally {
    mine.disconnect();
    theirs.disconnect();
    if (direct) direct.disconnect();
  }
});

// node-redlock over 3 ioredis Clusters (one cluster = one vote), run.sh's three
// clusters: a single resource and a hash-tagged multi-resource lock hold on every
// cluster; the third cluster's process is then killed, and locks still hold on 2 of 3.
const { default: Redlock, ExecutionError } = require('redlock');
const CLUSTERS = (process.env.INTEROP_CLUSTERS || '').split(';').filter(Boolean).map((s) => s.split(','));
const DOWN_PID = +(process.env.INTEROP_CLUSTER_DOWN_PID || 0);

const within = (ms, p, what) => Promise.race([p, new Promise((_, rej) => setTimeout(() => rej(new Error(`${what}: no answer in ${ms} ms`)), ms).unref())]);

test('node-redlock over 3 ioredis Clusters, one whole cluster down', async () => {
  assert.strictEqual(CLUSTERS.length, 3, 'INTEROP_CLUSTERS names 3 clusters');
  assert.ok(DOWN_PID > 0, 'INTEROP_CLUSTER_DOWN_PID is set');
  const connect = () => CLUSTERS.map((seeds) => {
    const [host, port] = seeds[0].split(':');
    // clusterRetryStrategy null: a killed cluster fails its vote at once instead of
    // queueing commands. slotsRefreshTimeout 10 s (default 1 s): on a loaded 2-core
    // machine CLUSTER SLOTS can take longer, and with no retry the client would give up
    // on a healthy cluster.
    return new Redis.Cluster([{ host, port: +port }], {
      clusterRetryStrategy: () => null,
      slotsRefreshTimeout: 10000,
    });
  });
  const mine = connect();
  const theirs = connect();
  try {
    const a = new Redlock(mine);
    const b = new Redlock(theirs, { retryCount: 0 });
    // node-redlock resolves at a quorum (2 of 3); a third cluster's vote may still be
    // on its way (its EVALSHA answered NOSCRIPT and resent as EVAL). Every vote is in
    // once the attempt's stats resolve.
    const allVotes = async (l) => (await l.attempts[l.attempts.length - 1]).votesFor.size;
    const lock = await within(15000, a.acquire(['nr:job'], 10000), 'acquire');
    assert.strictEqual(await allVotes(lock), 3, 'every cluster granted');
    for (const c of mine) assert.strictEqual(await c.get('nr:job'), lock.value);
    await assert.rejects(within(15000, b.acquire(['nr:job'], 10000), 'rival'), ExecutionError);
    const multi = await within(15000, a.acquire(['{nr:order}:a', '{nr:order}:b'], 10000), 'multi-resource');
    assert.strictEqual(await allVotes(multi), 3, 'every cluster granted both');
    for (const c of mine) assert.deepStrictEqual(await c.mget('{nr:order}:a', '{nr:order}:b'), [multi.value, multi.value]);
    // Without a hash tag the keys span slots: every cluster refuses (CROSSSLOT).
    await assert.rejects(within(15000, b.acquire(['nr:x', 'nr:y'], 10000), 'cross-slot'), ExecutionError);
    await within(15000, multi.release(), 'release multi');

    process.kill(DOWN_PID, 'SIGKILL');
    const extended = await within(15000, lock.extend(10000), 'extend with 2 of 3');
    await assert.rejects(within(15000, b.acquire(['nr:job'], 10000), 'rival, one cluster down'), ExecutionError);
    await within(15000, extended.release(), 'release with 2 of 3');
    const again = await within(15000, b.acquire(['nr:job'], 10000), 'acquire with 2 of 3');
    assert.strictEqual(await mine[0].get('nr:job'), again.value);
    assert.strictEqual(await mine[1].get('nr:job'), again.value);
    await within(15000, again.release(), 'release');
  } finally {
    for (const c of [...mine, ...theirs]) c.disconnect();
  }
});

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

'use strict';
// Transactions from Node clients with default settings (issue 9): ioredis multi() and
// node-redis multi(), exec results, a runtime error inside EXEC, and a WATCH conflict
// reported the way each client reports it (ioredis: exec() resolves to null, errors are
// [error, result] pairs; node-redis: exec() rejects with WatchError, and with
// MultiErrorReply when a command failed). Run against redis-server too.
const { test, before, after } = require('node:test');
const assert = require('node:assert/strict');
const Redis = require('ioredis');
const { createClient, MultiErrorReply, WatchError } = require('redis');
const { NODES, unique, within } = require('./common');

let io; // ioredis
let io2; // a second ioredis client, to interfere
let nr; // node-redis

before(async () => {
  const { host, port } = NODES[0];
  io = new Redis({ host, port });
  io2 = new Redis({ host, port });
  nr = createClient({ url: `redis://${host}:${port}` });
  nr.on('error', () => {});
  await within(10000, Promise.all([io.ping(), io2.ping(), nr.connect()]), 'connect');
});

after(async () => {
  await within(10000, Promise.all([io.quit(), io2.quit(), nr.close()]), 'close');
});

test('ioredis multi(): exec gives [error, result] pairs', async () => {
  const key = unique('iomulti');
  const counter = unique('iomulti');
  const res = await within(10000, io.multi()
    .set(key, 'a', 'PX', 30000, 'NX')
    .incr(counter)
    .incr(counter)
    .get(key)
    .exec(), 'exec');
  assert.deepEqual(res, [[null, 'OK'], [null, 1], [null, 2], [null, 'a']]);
  assert.equal(await io.del(key, counter), 2);
});

test('ioredis multi(): a runtime error is its command\'s entry, the rest still run', async () => {
  const key = unique('iomulti');
  const after = unique('iomulti');
  const res = await within(10000, io.multi().set(key, 'x').lpush(key, 'y').set(after, 'ran').exec(), 'exec');
  assert.deepEqual(res[0], [null, 'OK']);
  assert.ok(res[1][0] instanceof Error, `expected an error, got ${JSON.stringify(res[1])}`);
  assert.equal(res[1][0].message, 'WRONGTYPE Operation against a key holding the wrong kind of value');
  assert.deepEqual(res[2], [null, 'OK']);
  assert.equal(await io.get(after), 'ran');
  assert.equal(await io.del(key, after), 2);
});

test('ioredis multi(): a queue-time error aborts the transaction (EXECABORT)', async () => {
  const key = unique('iomulti');
  const tx = io.multi().set(key, 'never');
  tx.call('NOSUCHCOMMAND', 'x');
  await assert.rejects(within(10000, tx.exec(), 'exec'), (err) => {
    assert.match(err.message, /^EXECABORT Transaction discarded because of previous errors\./);
    assert.match(err.previousErrors[0].message, /^ERR unknown command 'NOSUCHCOMMAND'/);
    return true;
  });
  assert.equal(await io.exists(key), 0);
});

test('ioredis WATCH conflict: exec() resolves to null and nothing is written', async () => {
  const key = unique('iowatch');
  await io.set(key, '1');
  assert.equal(await io.watch(key), 'OK');
  assert.equal(await io.get(key), '1');
  await io2.set(key, 'other');
  const res = await within(10000, io.multi().set(key, 'mine').exec(), 'exec');
  assert.equal(res, null);
  assert.equal(await io.get(key), 'other');
  // EXEC forgot the watch: the next transaction commits
  assert.deepEqual(await io.multi().set(key, 'mine').exec(), [[null, 'OK']]);
  assert.equal(await io.del(key), 1);
});

test('node-redis multi(): exec gives the replies', async () => {
  const key = unique('nrmulti');
  const counter = unique('nrmulti');
  const res = await within(10000, nr.multi()
    .set(key, 'a', { condition: 'NX', expiration: { type: 'PX', value: 30000 } })
    .incr(counter)
    .incr(counter)
    .get(key)
    .exec(), 'exec');
  assert.deepEqual(res, ['OK', 1, 2, 'a']);
  assert.equal(await nr.del([key, counter]), 2);
});

test('node-redis multi(): a runtime error rejects with MultiErrorReply, the rest still ran', async () => {
  const key = unique('nrmulti');
  const after = unique('nrmulti');
  await assert.rejects(within(10000, nr.multi().set(key, 'x').lPush(key, 'y').set(after, 'ran').exec(), 'exec'), (err) => {
    assert.ok(err instanceof MultiErrorReply, `expected MultiErrorReply, got ${err}`);
    assert.deepEqual(err.errorIndexes, [1]);
    assert.equal(err.replies[0], 'OK');
    assert.equal(err.replies[1].message, 'WRONGTYPE Operation against a key holding the wrong kind of value');
    assert.equal(err.replies[2], 'OK');
    return true;
  });
  assert.equal(await nr.get(after), 'ran');
  assert.equal(await nr.del([key, after]), 2);
});

test('node-redis WATCH conflict: exec() rejects with WatchError, nothing is written', async () => {
  const key = unique('nrwatch');
  await nr.set(key, '1');
  assert.equal(await nr.watch(key), 'OK');
  assert.equal(await nr.get(key), '1');
  await io2.set(key, 'other');
  await assert.rejects(within(10000, nr.multi().set(key, 'mine').exec(), 'exec'), WatchError);
  assert.equal(await nr.get(key), 'other');
  assert.deepEqual(await nr.multi().set(key, 'mine').exec(), ['OK']);
  assert.equal(await nr.del(key), 1);
});

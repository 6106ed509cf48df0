"use strict";
// ioredis + redlock (default settings) over startGroup(): five nodes, one clock.
const { test, beforeEach, afterEach } = require("node:test");
const assert = require("node:assert/strict");
const Redis = require("ioredis");
const { default: Redlock, ExecutionError } = require("redlock");
const { startGroup } = require("redlockd");

let group;
let clients;
let redlock;

beforeEach(async () => {
  group = await startGroup({ nodes: 5 });
  clients = group.urls.map((u) => new Redis(u));
  redlock = new Redlock(clients);
  redlock.on("error", () => {}); // a vote against (a fenced node) is reported here
});

afterEach(async () => {
  for (const c of clients) c.disconnect();
  await group.close();
});

async function holders(nodes, key) {
  const held = [];
  for (const i of nodes) if (await clients[i].exists(key)) held.push(i);
  return held;
}

test("the lock holds with one node killed and one paused", async () => {
  await group.node(0).kill();
  await group.node(1).pause();
  const lock = await redlock.acquire(["job"], 10_000);
  assert.deepEqual(await holders([2, 3, 4], "job"), [2, 3, 4]);
  await group.advance(9_000);
  const extended = await lock.extend(10_000);
  await group.advance(9_000);
  assert.deepEqual(await holders([2, 3, 4], "job"), [2, 3, 4]);
  await extended.release();
  assert.deepEqual(await holders([2, 3, 4], "job"), []);
  await group.node(1).resume();
  assert.equal(await clients[1].ping(), "PONG");
});

test("three fenced nodes refuse the lock until the clock passes the fence", async () => {
  for (const i of [0, 1, 2]) assert.equal(await group.node(i).restart(), "fence");
  await assert.rejects(redlock.acquire(["job"], 10_000, { retryCount: 0 }), ExecutionError);
  assert.deepEqual(await holders([3, 4], "job"), []);
  const { fence_ms: fence } = await group.node(0).status();
  // Restarted on the same boot having granted nothing: fenced for the margin (1 s).
  assert.ok(fence >= 1_000, `fence ${fence}`);
  await group.advance(fence);
  const lock = await redlock.acquire(["job"], 10_000, { retryCount: 0 });
  assert.deepEqual(await holders([0, 1, 2, 3, 4], "job"), [0, 1, 2, 3, 4]);
  await lock.release();
});

test("the lock expires on every node with one advance", async () => {
  await redlock.acquire(["job"], 10_000);
  // redlock resolves at a quorum: the other nodes' SETs land just after (bounded wait).
  const deadline = Date.now() + 5_000;
  while ((await holders([0, 1, 2, 3, 4], "job")).length < 5 && Date.now() < deadline) {
    await new Promise((r) => setTimeout(r, 2));
  }
  assert.equal((await holders([0, 1, 2, 3, 4], "job")).length, 5);
  await group.advance(10_000);
  // As in Redis, a key outlives its last millisecond: PTTL 0, still there.
  await assert.rejects(redlock.acquire(["job"], 10_000, { retryCount: 0 }), ExecutionError);
  await group.advance(1);
  assert.deepEqual(await holders([0, 1, 2, 3, 4], "job"), []);
  const lock = await redlock.acquire(["job"], 10_000, { retryCount: 0 });
  await lock.release();
});

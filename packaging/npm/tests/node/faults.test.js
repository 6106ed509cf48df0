"use strict";
// Scoped faults from Node (node.fault()): each action fires on the requests in its
// scope only, is in force once fault() resolves, and is recorded; the history; and
// what ioredis + redlock do when one node answers errors or a reply is lost.
const { test } = require("node:test");
const assert = require("node:assert/strict");
const net = require("node:net");
const Redis = require("ioredis");
const { default: Redlock } = require("redlock");
const { startServer, startGroup, RedlockdError } = require("redlockd");

function resp(...args) {
  return `*${args.length}\r\n` + args.map((a) => `$${Buffer.byteLength(a)}\r\n${a}\r\n`).join("");
}

/** Sends raw requests; resolves to everything received until the server closes. */
function untilClosed(srv, ...requests) {
  return new Promise((resolve, reject) => {
    const s = net.connect(srv.port, srv.host);
    let got = "";
    s.on("connect", () => s.write(requests.join("")));
    s.on("data", (d) => (got += d));
    s.on("close", () => resolve(got));
    s.on("error", reject);
    setTimeout(() => (s.destroy(), reject(new Error(`not closed; got ${JSON.stringify(got)}`))), 5_000).unref();
  });
}

/** A client that reports a closed connection instead of reconnecting and resending. */
function plain(url, name) {
  const r = new Redis(url, { connectionName: name, maxRetriesPerRequest: 0, retryStrategy: () => null, autoResendUnfulfilledCommands: false });
  r.on("error", () => {}); // the closed connection is asserted on the command itself
  return r;
}

async function withServer(fn) {
  const srv = await startServer();
  try {
    await fn(srv);
  } finally {
    await srv.close();
  }
}

test("drop_reply runs the command, loses its reply and closes, for its scope only", () =>
  withServer(async (srv) => {
    const f = await srv.fault({ action: "drop_reply", command: "set", key: "lock:*", clientName: "w1", count: 1 });
    assert.equal(await f.fired(), 0);
    const w1 = plain(srv.url, "w1");
    const w2 = plain(srv.url, "w2");
    assert.equal(await w1.set("other", "1", "NX"), "OK");
    assert.equal(await w1.get("lock:a"), null);
    assert.equal(await w2.set("lock:b", "w2", "NX"), "OK");
    await assert.rejects(w1.set("lock:a", "w1", "NX", "PX", 1_000), /Connection is closed/);
    assert.equal(await w2.get("lock:a"), "w1");
    const [firing] = await f.firings();
    assert.deepEqual(firing.command, ["set", "lock:a", "w1", "NX", "PX", "1000"]);
    assert.equal(firing.client.name, "w1");
    assert.equal(firing.mono_ms, (await srv.clock()).monoMs);
    assert.equal((await f.status()).matched, 1);
    w1.disconnect();
    w2.disconnect();
  }));

test("drop_request and close_before close without running; close_after answers first", () =>
  withServer(async (srv) => {
    const r = plain(srv.url);
    for (const action of ["drop_request", "close_before"]) {
      const f = await srv.fault({ action, command: "set", key: "lock:*" });
      assert.equal(await untilClosed(srv, resp("INCR", action), resp("SET", "lock:a", "x")), ":1\r\n");
      assert.equal(await r.exists("lock:a"), 0);
      await f.clear();
    }
    await srv.fault({ action: "close_after", command: "set", key: "lock:*" });
    assert.equal(await untilClosed(srv, resp("SET", "lock:a", "x")), "+OK\r\n");
    assert.equal(await r.get("lock:a"), "x");
    r.disconnect();
  }));

test("NOSCRIPT, TRYAGAIN, BUSY, LOADING in Redis's words, and an error of the test's choosing", () =>
  withServer(async (srv) => {
    const r = plain(srv.url);
    const cases = {
      noscript: "NOSCRIPT No matching script. Please use EVAL.",
      tryagain: "TRYAGAIN Multiple keys request during rehashing of slot",
      busy: "BUSY Redis is busy running a script. You can only call SCRIPT KILL or SHUTDOWN NOSAVE.",
      loading: "LOADING Redis is loading the dataset in memory",
    };
    for (const [action, words] of Object.entries(cases)) {
      const f = await srv.fault({ action, command: "get", key: "hit", count: 1 });
      assert.equal(await r.get("miss"), null);
      await assert.rejects(r.get("hit"), (e) => e.message === words);
      assert.equal(await r.get("hit"), null);
      await f.clear();
    }
    await srv.fault({ action: "error", error: "ERR injected", command: "incr" });
    await assert.rejects(r.incr("n"), /ERR injected/);
    assert.equal(await r.get("n"), null);
    await assert.rejects(srv.fault({ action: "error", error: "no code" }), RedlockdError);
    await assert.rejects(srv.fault({ action: "explode" }), /unknown action/);
    r.disconnect();
  }));

test("a delay on the test clock holds one reply until the clock moves; real time too", () =>
  withServer(async (srv) => {
    await srv.fault({ action: "delay", ms: 5_000, command: "set", key: "slow:*" });
    const slow = plain(srv.url);
    const fast = plain(srv.url);
    let answered = false;
    const pending = slow.set("slow:1", "x").then((v) => ((answered = true), v));
    const deadline = Date.now() + 5_000;
    while ((await fast.get("slow:1")) === null && Date.now() < deadline);
    assert.equal(await fast.get("slow:1"), "x"); // it ran; its reply waits
    await new Promise((r) => setTimeout(r, 30));
    assert.equal(answered, false);
    await srv.advance(5_000);
    assert.equal(await pending, "OK");
    await srv.fault({ action: "delay", ms: 40, clock: "real", command: "ping" });
    const t0 = Date.now();
    assert.equal(await fast.ping(), "PONG");
    assert.ok(Date.now() - t0 >= 35, `${Date.now() - t0} ms`);
    slow.disconnect();
    fast.disconnect();
  }));

test("client id and address scopes; faults listed and cleared; in force once added", () =>
  withServer(async (srv) => {
    const a = plain(srv.url);
    const b = plain(srv.url);
    const aId = await a.client("ID");
    const bAddr = /addr=(\S+)/.exec(await b.client("INFO"))[1];
    await srv.fault({ action: "error", error: "ERR by id", clientId: aId });
    await srv.fault({ action: "error", error: "ERR by addr", clientAddr: bAddr });
    await assert.rejects(a.ping(), /by id/);
    await assert.rejects(b.ping(), /by addr/);
    const c = plain(srv.url);
    assert.equal(await c.ping(), "PONG");
    assert.equal((await srv.nodes[0].faults()).length, 2);
    assert.equal((await srv.clearFaults()).length, 2);
    assert.equal(await a.ping(), "PONG");
    for (let i = 0; i < 50; i++) {
      const f = await srv.fault({ action: "error", error: "ERR now", key: `k${i}`, count: 1 });
      await assert.rejects(c.get(`k${i}`), /ERR now/);
      await f.clear();
      assert.equal(await c.get(`k${i}`), null);
    }
    [a, b, c].forEach((x) => x.disconnect());
  }));

test("the history records requests, replies, clients and the fault that fired", async () => {
  const group = await startGroup({ nodes: 2 });
  try {
    const node = group.node(1);
    await node.record(100);
    const f = await node.fault({ action: "drop_reply", command: "set", key: "lock" });
    const r = plain(node.url, "me");
    assert.equal(await r.get("x"), null);
    await group.advance(100);
    await assert.rejects(r.set("lock", "me", "NX"));
    const mine = (await node.history()).filter((e) => e.client.name === "me");
    const last = mine.slice(-2).map((e) => [e.command, e.reply, e.outcome, e.fault]);
    assert.deepEqual(last, [
      [["get", "x"], null, "answered", null],
      [["set", "lock", "me", "NX"], "OK", "reply_dropped", f.id],
    ]);
    assert.equal(mine.at(-1).mono_ms, mine.at(-2).mono_ms + 100);
    assert.ok((await node.history({ take: true })).length > 0);
    assert.deepEqual(await node.history(), []);
    r.disconnect();
  } finally {
    await group.close();
  }
});

// redlock 5.0.0-beta.2 over ioredis (defaults): what they do when a node misbehaves.

async function redlockGroup(fn) {
  const group = await startGroup({ nodes: 3 });
  const clients = group.urls.map((u) => new Redis(u));
  // A dropped reply closes the connection; ioredis reconnects and reports it here.
  for (const c of clients) c.on("error", () => {});
  const redlock = new Redlock(clients, { retryCount: 0 });
  const votes = [];
  redlock.on("error", (e) => votes.push(e));
  try {
    await fn(group, clients, redlock, votes);
  } finally {
    clients.forEach((c) => c.disconnect());
    await group.close();
  }
}

async function holders(clients) {
  return Promise.all(clients.map((c) => c.get("job")));
}

// redlock's release resolves once a majority answered; the last node's release may
// still be on its way: wait for it (bounded).
async function releasedEverywhere(clients) {
  const deadline = Date.now() + 5_000;
  let now = await holders(clients);
  while (now.some((v) => v !== null) && Date.now() < deadline) {
    await new Promise((r) => setTimeout(r, 2));
    now = await holders(clients);
  }
  return now;
}

test("redlock: one node answering errors still gives the lock (2 of 3), reported as an error event", () =>
  redlockGroup(async (group, clients, redlock, votes) => {
    const f = await group.node(0).fault({ action: "error", error: "ERR injected", command: "eval" });
    const g = await group.node(0).fault({ action: "error", error: "ERR injected", command: "evalsha" });
    const lock = await redlock.acquire(["job"], 10_000);
    assert.ok(votes.some((e) => /ERR injected/.test(e.message)));
    assert.ok((await f.fired()) + (await g.fired()) >= 1);
    await group.clearFaults();
    assert.deepEqual(await holders(clients), [null, lock.value, lock.value]);
    await lock.release();
    assert.deepEqual(await releasedEverywhere(clients), [null, null, null]);
  }));

test("redlock: a lost acquire reply on one node: ioredis resends, redlock still holds 2 of 3 and releases all 3", () =>
  redlockGroup(async (group, clients, redlock) => {
    const f = await group.node(0).fault({ action: "drop_reply", command: "eval", key: "job", count: 1 });
    await group.record();
    const lock = await redlock.acquire(["job"], 10_000);
    assert.equal(await f.fired(), 1);
    // The script ran on node 0 (the key is the lock's); ioredis resends it on a new
    // connection (after redlock resolved with the other two), and the second run,
    // finding the key, votes against.
    const evals = async () => (await group.node(0).history()).filter((e) => e.command[0] === "eval");
    const deadline = Date.now() + 5_000;
    while ((await evals()).length < 2 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 2));
    const node0 = await evals();
    assert.deepEqual(node0.slice(0, 2).map((e) => [e.reply, e.outcome]), [[1, "reply_dropped"], [0, "answered"]]);
    assert.deepEqual(await holders(clients), [lock.value, lock.value, lock.value]);
    await lock.release();
    assert.deepEqual(await releasedEverywhere(clients), [null, null, null]);
  }));

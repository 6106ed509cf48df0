"use strict";
// The harness's controls from Node: the clock, faults, bad requests, isolation
// between harnesses, and no process left behind.
const { test } = require("node:test");
const assert = require("node:assert/strict");
const fs = require("node:fs");
const { spawn } = require("node:child_process");
const Redis = require("ioredis");
const { startServer, startGroup, startCluster, Cluster, Group, RedlockdError } = require("redlockd");

test("a 10 s lock expires after advance(10_001), without sleeping", async () => {
  const srv = await startServer();
  const r = new Redis(srv.url);
  try {
    const t0 = Date.now();
    assert.equal(await r.set("job", "me", "PX", 10_000, "NX"), "OK");
    await srv.advance(9_999);
    assert.equal(await r.pttl("job"), 1);
    await srv.advance(2);
    assert.equal(await r.get("job"), null);
    assert.ok(Date.now() - t0 < 5_000);
  } finally {
    r.disconnect();
    await srv.close();
  }
});

test("kill, restart with the fence, clean restart", async () => {
  const srv = await startServer();
  const r = new Redis(srv.url, { lazyConnect: true, maxRetriesPerRequest: 0 });
  try {
    await r.set("k", "v", "PX", 5_000);
    assert.equal(await srv.restart("clean"), "snapshot");
    assert.equal(await r.get("k"), "v");
    await srv.kill();
    assert.equal((await srv.status()).state, "killed");
    await assert.rejects(srv.pause(), /pause: node 0 is killed; restart it first/);
    assert.equal(await srv.restart(), "fence");
    await assert.rejects(r.set("k", "v"), /TRYAGAIN/);
    await srv.advance((await srv.status()).fence_ms);
    assert.equal(await r.set("k", "v"), "OK");
  } finally {
    r.disconnect();
    await srv.close();
  }
});

test("bad requests get clear errors and the harness keeps serving", async () => {
  const c = await startGroup({ nodes: 2 });
  try {
    await assert.rejects(c.request("frobnicate"), (e) => e instanceof RedlockdError && /unknown op/.test(e.message));
    await assert.rejects(c.request("kill", { node: 2 }), /node 2 is out of range: this harness has 2 nodes/);
    await assert.rejects(c.request("advance", { ms: 1.5 }), /whole number/);
    await assert.rejects(c.request("advance", { msec: 1 }), /unknown field "msec"/);
    assert.equal(await c.request("ping"), true);
  } finally {
    await c.close();
  }
});

test("two groups at once share no port, key or clock", async () => {
  const [a, b] = await Promise.all([startGroup({ nodes: 3 }), startGroup({ nodes: 3 })]);
  const ra = new Redis(a.urls[0]);
  const rb = new Redis(b.urls[0]);
  try {
    assert.equal(new Set([...a.nodes, ...b.nodes].map((n) => n.port)).size, 6);
    await ra.set("k", "a", "PX", 1_000);
    assert.equal(await rb.get("k"), null);
    await rb.set("k", "b", "PX", 1_000);
    await a.advance(1_001);
    assert.equal(await ra.get("k"), null);
    assert.equal(await rb.get("k"), "b");
  } finally {
    ra.disconnect();
    rb.disconnect();
    await Promise.all([a.close(), b.close()]);
  }
});

function gone(pid) {
  try {
    const stat = fs.readFileSync(`/proc/${pid}/stat`, "utf8");
    return stat.slice(stat.lastIndexOf(")") + 2).startsWith("Z");
  } catch (_) {
    return true;
  }
}

test("a killed test process leaves no redlockd behind", async () => {
  const script =
    'const { startGroup } = require("redlockd");' +
    "startGroup({ nodes: 3 }).then((c) => {" +
    '  console.log(JSON.stringify({ pid: c.pid, dirs: c.nodes.map((n) => n.dir) }));' +
    "  setInterval(() => {}, 1000);" +
    "});";
  const child = spawn(process.execPath, ["-e", script], { stdio: ["ignore", "pipe", "inherit"] });
  const line = await new Promise((resolve, reject) => {
    let buf = "";
    child.stdout.on("data", (d) => {
      buf += d;
      if (buf.includes("\n")) resolve(buf.split("\n")[0]);
    });
    child.on("exit", () => reject(new Error("the child exited first")));
  });
  const { pid, dirs } = JSON.parse(line);
  assert.ok(!gone(pid));
  child.kill("SIGKILL");
  const deadline = Date.now() + 10_000;
  while (!gone(pid) && Date.now() < deadline) await new Promise((r) => setTimeout(r, 5));
  assert.ok(gone(pid), `redlockd harness ${pid} outlived its parent`);
  for (const d of dirs) assert.ok(!fs.existsSync(d), `${d} left behind`);
});

test("the old names Cluster and startCluster still work", () => {
  assert.equal(startCluster, startGroup);
  assert.equal(Cluster, Group);
});

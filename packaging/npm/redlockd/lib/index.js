"use strict";
// A client of `redlockd harness` (docs/testing.md): start it, read its ready line,
// send it requests, stop it. All nodes of a harness run in its one process, on one
// manual clock; the process stops when its stdin closes, so a test runner that dies
// leaves nothing behind.

const { spawn } = require("node:child_process");
const fs = require("node:fs");

const VERSION = require("../package.json").version;

// `${process.platform} ${process.arch}` -> the package holding that platform's binary.
const PLATFORM_PACKAGES = {
  "linux x64": "@redlockd/linux-x64",
};

class RedlockdError extends Error {
  constructor(message) {
    super(message);
    this.name = "RedlockdError";
  }
}

function isMusl() {
  if (process.platform !== "linux") return false;
  const report = process.report && process.report.getReport();
  return !(report && report.header && report.header.glibcVersionRuntime);
}

function checkExecutable(file, what) {
  try {
    fs.accessSync(file, fs.constants.X_OK);
    if (fs.statSync(file).isFile()) return file;
  } catch (_) {
    // reported below
  }
  throw new RedlockdError(`redlockd: ${what} (${file}) is not an executable file`);
}

/** The redlockd binary: `explicit`, else $REDLOCKD_BIN, else the platform package's. */
function resolveBinary(explicit) {
  if (explicit) return checkExecutable(explicit, "the binary given");
  if (process.env.REDLOCKD_BIN) return checkExecutable(process.env.REDLOCKD_BIN, "REDLOCKD_BIN");
  const key = `${process.platform} ${process.arch}`;
  const pkg = PLATFORM_PACKAGES[key];
  if (!pkg) {
    throw new RedlockdError(
      `redlockd: no prebuilt binary for ${process.platform}-${process.arch} (there are: ` +
        `${Object.values(PLATFORM_PACKAGES).join(", ")}). Build redlockd from source ` +
        "(cargo install --locked --path . in its repository) and set REDLOCKD_BIN to the binary."
    );
  }
  if (isMusl()) {
    throw new RedlockdError(
      `redlockd: ${pkg} is built for glibc; this system uses musl (Alpine?). ` +
        "Set REDLOCKD_BIN to a redlockd binary built for it."
    );
  }
  try {
    return require.resolve(`${pkg}/bin/redlockd`);
  } catch (_) {
    throw new RedlockdError(
      `redlockd: the package ${pkg}, which holds the redlockd binary for this platform, is not installed.\n` +
        `It is an optional dependency of redlockd@${VERSION}; npm leaves it out when run with ` +
        "--omit=optional or --no-optional, when node_modules was installed on another platform " +
        "and copied here, or when package-lock.json was made without it (npm/cli#4828: remove " +
        "node_modules and package-lock.json, then npm install again).\n" +
        `Install it: npm install --save-dev ${pkg}@${VERSION}\n` +
        `(Until it is published on npm: the redlockd-linux-x64-${VERSION}.tgz that packaging/build.sh ` +
        "made next to redlockd's tarball; install both, as redlockd's README says.)\n" +
        "Or set REDLOCKD_BIN to a redlockd binary."
    );
  }
}

function msArg(value, what) {
  if (typeof value !== "number" || !Number.isInteger(value)) {
    throw new TypeError(`${what}: a whole number of milliseconds, not ${value}`);
  }
  return value;
}

function durationFlag(value) {
  return typeof value === "string" ? value : `${msArg(value, "duration")}ms`;
}

function unixMs(value) {
  return value instanceof Date ? value.getTime() : msArg(value, "setWall");
}

function reading(v) {
  return { monoMs: v.mono_ms, wallMs: v.wall_ms };
}

// A fault's options, camelCase in JS, as the protocol names them.
const FAULT_FIELDS = {
  action: "action",
  command: "command",
  key: "key",
  clientName: "client_name",
  clientId: "client_id",
  clientAddr: "client_addr",
  count: "count",
  skip: "skip",
  probability: "probability",
  seed: "seed",
  ms: "ms",
  clock: "clock",
  error: "error",
};

function faultFields(options) {
  if (typeof options === "string") options = { action: options };
  const fields = {};
  for (const [k, v] of Object.entries(options || {})) {
    const name = FAULT_FIELDS[k];
    if (!name) throw new TypeError(`fault: unknown option ${JSON.stringify(k)}`);
    if (v !== undefined && v !== null) fields[name] = k === "ms" ? msArg(v, "fault") : v;
  }
  return fields;
}

/** A fault scoped to a command, key or client of one node (`node.fault()`), in force
 * on the node once `node.fault()` resolved. */
class Fault {
  constructor(node, info) {
    this.node = node;
    /** Its id on its node. */
    this.id = info.fault;
    /** The fault as the harness took it (action, scope, count...). */
    this.spec = info;
  }
  /** The fault now: its spec, `matched`, `fired` and `firings` (each with the `command`
   * as sent, the `client` { id, name, addr }, `mono_ms` and `wall_ms`). */
  async status() {
    const f = (await this.node.faults()).find((x) => x.fault === this.id);
    if (!f) throw new RedlockdError(`node ${this.node.index} has no fault ${this.id} (cleared)`);
    return f;
  }
  /** How many times it fired. */
  async fired() {
    return (await this.status()).fired;
  }
  /** Its firings, oldest first (the last 1000). */
  async firings() {
    return (await this.status()).firings;
  }
  /** Removes it (no request sees it once this resolves); resolves to its last status. */
  clear() {
    return this.node._op("clear_fault", { fault: this.id });
  }
}

/** One node of a harness: its address and its faults. */
class Node {
  constructor(harness, info) {
    this._harness = harness;
    this.index = info.index;
    this.host = info.host;
    this.port = info.port;
    this.url = info.url;
    this.dir = info.dir;
  }
  get addr() {
    return `${this.host}:${this.port}`;
  }
  _op(op, fields) {
    return this._harness.request(op, { node: this.index, ...fields });
  }
  /** The process dies: connections dropped, the port refuses connections. */
  async kill() {
    await this._op("kill");
  }
  /** "crash" (default: keys lost, restart fence up), "lose_dir" or "clean" (keys kept).
   * Resolves to how it booted: "fence", "snapshot" or "fresh". */
  async restart(mode = "crash") {
    return (await this._op("restart", { mode })).boot;
  }
  /** Like SIGSTOP: connections stay open, nothing is answered. */
  async pause() {
    await this._op("pause");
  }
  /** Ends a pause, once what arrived meanwhile has run. */
  async resume() {
    await this._op("resume");
  }
  /** A partition: connections dropped and refused; the node keeps its keys. */
  async isolate() {
    await this._op("isolate");
  }
  async heal() {
    await this._op("heal");
  }
  /** Steps this node's wall time only; TTLs do not move. */
  async jumpWall(ms) {
    await this._op("jump_wall", { ms: msArg(ms, "jumpWall") });
  }
  async setWall(when) {
    await this._op("set_wall", { unix_ms: unixMs(when) });
  }
  /** { index, port, state, fence_ms, wall_ms } */
  async status() {
    return (await this._harness.request("nodes"))[this.index];
  }
  /** Adds a fault scoped to this node's requests; in force once this resolves.
   * Scope: command ("set", "evalsha", "script|load"), key (a glob), clientName,
   * clientId, clientAddr; fires after `skip` requests in scope, at most `count` times,
   * with `probability` (seeded by `seed`: a run repeats). Actions: "drop_reply",
   * "drop_request" / "close_before", "close_after", "delay" (`ms`, clock "manual" or
   * "real"), "error" (`error`: "ERR ..."), "noscript", "tryagain", "busy", "loading". */
  async fault(options) {
    return new Fault(this, await this._op("fault", faultFields(options)));
  }
  /** The faults set on this node, oldest first, with their firings. */
  faults() {
    return this._op("faults");
  }
  /** Removes every fault of this node; resolves to them as they were. */
  clearFaults() {
    return this._op("clear_faults");
  }
  /** Records every request and reply from now on (the last `capacity`; 0 stops). */
  async record(capacity = 10_000) {
    await this._op("record", { capacity });
  }
  /** What was recorded, oldest first: { seq, client, command, reply, outcome, fault,
   * mono_ms }; `take` empties the record. */
  history({ take = false } = {}) {
    return this._op("history", { take });
  }
}

/** N nodes on one manual clock, in one `redlockd harness` process. */
class Group {
  constructor(child, ready, binary) {
    this._child = child;
    this._pending = new Map();
    this._nextId = 0;
    this._exited = null;
    this.binary = binary;
    this.ready = ready;
    this.pid = ready.pid;
    this.version = ready.version;
    this.nodes = ready.nodes.map((n) => new Node(this, n));
  }

  get urls() {
    return this.nodes.map((n) => n.url);
  }

  node(i) {
    const n = this.nodes[i];
    if (!n) throw new RangeError(`node ${i}: this harness has ${this.nodes.length} nodes`);
    return n;
  }

  /** Sends one request; resolves to its `ok` value, rejects with RedlockdError. */
  request(op, fields = {}) {
    if (this._exited) {
      return Promise.reject(new RedlockdError(`${op}: the redlockd harness ${this._exited}`));
    }
    const id = ++this._nextId;
    return new Promise((resolve, reject) => {
      this._pending.set(id, { resolve, reject, op });
      this._refresh();
      this._child.stdin.write(JSON.stringify({ id, op, ...fields }) + "\n");
    });
  }

  _reply(line) {
    let msg;
    try {
      msg = JSON.parse(line);
    } catch (_) {
      return;
    }
    const p = this._pending.get(msg.id);
    if (!p) return;
    this._pending.delete(msg.id);
    this._refresh();
    if ("error" in msg) p.reject(new RedlockdError(msg.error));
    else p.resolve(msg.ok);
  }

  _gone(why) {
    this._exited = why;
    for (const p of this._pending.values()) {
      p.reject(new RedlockdError(`${p.op}: the redlockd harness ${why}`));
    }
    this._pending.clear();
  }

  // Keep the event loop alive only while a reply is awaited: an idle harness must not
  // keep a test runner from exiting (it stops by itself when this process ends).
  _refresh() {
    const out = this._child.stdout;
    if (this._pending.size > 0) out.ref();
    else out.unref();
  }

  async clock() {
    return reading(await this.request("clock"));
  }
  /** Moves the shared clock forward on every node. */
  async advance(ms) {
    return reading(await this.request("advance", { ms: msArg(ms, "advance") }));
  }
  /** Steps every node's wall time only. */
  async jumpWall(ms) {
    return reading(await this.request("jump_wall", { ms: msArg(ms, "jumpWall") }));
  }
  async setWall(when) {
    return reading(await this.request("set_wall", { unix_ms: unixMs(when) }));
  }

  /** Every node's faults (each with its `node`). */
  faults() {
    return this.request("faults");
  }
  /** Removes every fault of every node. */
  clearFaults() {
    return this.request("clear_faults");
  }
  /** Records every request and reply on every node. */
  async record(capacity = 10_000) {
    await this.request("record", { capacity });
  }
  /** Every node's history (each entry with its `node`). */
  history({ take = false } = {}) {
    return this.request("history", { take });
  }

  /** Stops the harness (bounded) and removes its temporary directories. */
  async close() {
    const child = this._child;
    if (child.exitCode !== null || child.signalCode !== null) return;
    const exited = new Promise((resolve) => child.once("exit", resolve));
    child.stdin.end();
    const timer = setTimeout(() => child.kill("SIGKILL"), 10_000);
    await exited;
    clearTimeout(timer);
  }
}

// `await using c = await startGroup()` where the runtime has explicit resource management.
if (typeof Symbol.asyncDispose === "symbol") {
  Group.prototype[Symbol.asyncDispose] = function dispose() {
    return this.close();
  };
}

/** One node; its address and faults are on the object itself. */
class Server extends Group {
  get url() {
    return this.nodes[0].url;
  }
  get host() {
    return this.nodes[0].host;
  }
  get port() {
    return this.nodes[0].port;
  }
  get addr() {
    return this.nodes[0].addr;
  }
  kill() {
    return this.nodes[0].kill();
  }
  restart(mode) {
    return this.nodes[0].restart(mode);
  }
  pause() {
    return this.nodes[0].pause();
  }
  resume() {
    return this.nodes[0].resume();
  }
  isolate() {
    return this.nodes[0].isolate();
  }
  heal() {
    return this.nodes[0].heal();
  }
  status() {
    return this.nodes[0].status();
  }
  fault(options) {
    return this.nodes[0].fault(options);
  }
}

function harnessArgs(nodes, o) {
  const args = ["harness", "--nodes", String(nodes)];
  if (o.maxTtl !== undefined) args.push("--max-ttl", durationFlag(o.maxTtl));
  if (o.restartDelay !== undefined) args.push("--restart-delay", durationFlag(o.restartDelay));
  if (o.requireTtl) args.push("--require-ttl");
  if (o.requirepass !== undefined) args.push("--requirepass", o.requirepass);
  if (o.seed !== undefined) args.push("--seed", String(o.seed));
  if (o.dir !== undefined) args.push("--dir", o.dir);
  if (o.log !== undefined) args.push("--log", o.log);
  return args.concat(o.extraArgs || []);
}

function start(Kind, nodes, options = {}) {
  if (!Number.isInteger(nodes) || nodes < 1) {
    return Promise.reject(new RangeError(`nodes must be a whole number, 1 or more, not ${nodes}`));
  }
  let binary;
  try {
    binary = resolveBinary(options.binary);
  } catch (e) {
    return Promise.reject(e);
  }
  const timeoutMs = options.startTimeoutMs ?? 10_000;
  return new Promise((resolve, reject) => {
    const child = spawn(binary, harnessArgs(nodes, options), {
      stdio: ["pipe", "pipe", "inherit"],
    });
    let harness = null;
    let buf = "";
    const fail = (msg) => {
      clearTimeout(timer);
      if (child.exitCode === null && child.signalCode === null) child.kill("SIGKILL");
      reject(new RedlockdError(msg));
    };
    const timer = setTimeout(() => fail(`redlockd harness was not ready within ${timeoutMs} ms`), timeoutMs);
    child.on("error", (e) => {
      if (harness) harness._gone(`failed: ${e.message}`);
      else fail(`redlockd: cannot run ${binary}: ${e.message}`);
    });
    child.on("exit", (code, signal) => {
      const why = `exited (${signal || `status ${code}`})`;
      if (harness) harness._gone(why);
      else fail(`redlockd harness ${why} before it was ready (its stderr says why)`);
    });
    // A harness that is gone must not crash the test process with EPIPE.
    child.stdin.on("error", () => {});
    child.stdout.setEncoding("utf8");
    child.stdout.on("data", (chunk) => {
      buf += chunk;
      let nl;
      while ((nl = buf.indexOf("\n")) >= 0) {
        const line = buf.slice(0, nl);
        buf = buf.slice(nl + 1);
        if (harness) {
          harness._reply(line);
          continue;
        }
        let ready;
        try {
          ready = JSON.parse(line);
        } catch (_) {
          return fail(`redlockd harness: not a ready line: ${line}`);
        }
        if (!ready.ready) return fail(`redlockd harness could not start: ${ready.error}`);
        clearTimeout(timer);
        harness = new Kind(child, ready, binary);
        child.unref();
        child.stdin.unref?.();
        harness._refresh();
        resolve(harness);
      }
    });
  });
}

/** One node on a manual clock. Options: maxTtl, restartDelay, requireTtl,
 * requirepass, seed, dir, log, binary, startTimeoutMs, extraArgs. */
function startServer(options = {}) {
  return start(Server, 1, options);
}

/** `options.nodes` nodes (default 5) on one manual clock. */
function startGroup(options = {}) {
  return start(Group, options.nodes ?? 5, options);
}

// The old names (before "cluster" was kept for Redis Cluster); they still work.
const Cluster = Group;
const startCluster = startGroup;

module.exports = {
  startServer,
  startGroup,
  startCluster,
  resolveBinary,
  RedlockdError,
  Group,
  Cluster,
  Server,
  Node,
  Fault,
  VERSION,
};

'use strict';
// redlockd's --lock-delay through node-redlock 5 (its acquire script: EXISTS, then SET
// PX): a holder process stopped with SIGSTOP past its TTL and resumed within the delay
// finds that nobody took its lock; with the delay off the contender is granted at once.
// The shared nodes' delay is set with CONFIG SET for this file and turned off after.
const { test, before, after } = require('node:test');
const assert = require('node:assert/strict');
const path = require('node:path');
const readline = require('node:readline');
const { spawn } = require('node:child_process');
const Redis = require('ioredis');
const { default: Redlock } = require('redlock');
const { NODES, redlockdOnly, unique, within } = require('./common');

let clients;

before(async () => {
  clients = NODES.slice(0, 5).map(({ host, port }) => new Redis({ host, port }));
  await within(10000, Promise.all(clients.map((c) => c.ping())), 'PING on every node');
});

after(async () => {
  if (redlockdOnly.skip === undefined) {
    await within(10000, setDelay('0'), 'CONFIG SET lock-delay 0');
  }
  await within(10000, Promise.all(clients.map((c) => c.quit())), 'QUIT on every node');
});

function setDelay(value) {
  return Promise.all(clients.map((c) => c.config('SET', 'lock-delay', value)));
}

function advance(ms) {
  return Promise.all(clients.map((c) => c.call('DEBUG', 'CLOCK', 'ADVANCE', String(ms))));
}

// The holder: acquires with a 1 s TTL, says so, then on "go" releases and says how.
const HOLDER = `
const Redis = require('ioredis');
const { default: Redlock } = require('redlock');
const [key, nodes] = process.argv.slice(1);
const clients = nodes.split(',').map((n) => new Redis({ port: Number(n.split(':')[1]) }));
const redlock = new Redlock(clients, { retryCount: 0 });
(async () => {
  const lock = await redlock.acquire([key], 1000);
  console.log('acquired');
  process.stdin.once('data', async () => {
    try { await lock.release(); console.log('released'); }
    catch (e) { console.log('release failed ' + e.name); }
    await Promise.all(clients.map((c) => c.quit()));
    process.exit(0);
  });
})();
`;

async function startHolder(key) {
  const nodes = NODES.slice(0, 5).map(({ host, port }) => `${host}:${port}`).join(',');
  const child = spawn(process.execPath, ['-e', HOLDER, key, nodes], {
    cwd: path.join(__dirname, '..'),
    stdio: ['pipe', 'pipe', 'inherit'],
  });
  const lines = readline.createInterface({ input: child.stdout });
  const iter = lines[Symbol.asyncIterator]();
  const first = await within(15000, iter.next(), 'holder acquired');
  assert.equal(first.value, 'acquired');
  const exited = new Promise((resolve) => child.on('exit', resolve));
  return { child, iter, exited };
}

async function pausedHolder(delay) {
  await within(10000, setDelay(delay), `CONFIG SET lock-delay ${delay}`);
  const key = unique('lockdelay');
  const holder = await startHolder(key);
  const contender = new Redlock(clients, { retryCount: 0 });
  let granted;
  try {
    holder.child.kill('SIGSTOP');
    try {
      // The holder is stopped past its 1 s TTL.
      await within(10000, advance(1500), 'DEBUG CLOCK ADVANCE');
      const attempt = contender.acquire([key], 1000).then((l) => l, () => null);
      granted = await within(15000, attempt, 'contender');
    } finally {
      holder.child.kill('SIGCONT');
    }
    holder.child.stdin.write('go\n');
    const said = await within(15000, holder.iter.next(), 'holder released');
    await within(15000, holder.exited, 'holder exit');
    return { key, contender, granted, said: said.value };
  } finally {
    if (holder.child.exitCode === null) holder.child.kill('SIGKILL');
  }
}

test('lock-delay 5s: a paused holder finds its lock not taken by anyone', redlockdOnly, async () => {
  const { key, contender, granted, said } = await pausedHolder('5000');
  assert.equal(granted, null, 'a client was granted the lock while its holder was paused');
  // Its lock expired: the release finds nothing, and nobody else holds it.
  assert.match(said, /^release failed/);
  assert.deepEqual(await Promise.all(clients.map((c) => c.get(key))), [null, null, null, null, null]);
  // The delay ends 5 s after the deadline (the TTL ran out 500 ms ago).
  await within(10000, advance(4500), 'DEBUG CLOCK ADVANCE');
  await assert.rejects(contender.acquire([key], 1000));
  await within(10000, advance(1), 'DEBUG CLOCK ADVANCE');
  const lock = await within(15000, contender.acquire([key], 1000), 'acquire after the delay');
  await lock.release();
});

test('lock-delay off: the expired lock goes to the contender at once', redlockdOnly, async () => {
  const { granted } = await pausedHolder('0');
  assert.notEqual(granted, null, 'with the delay off the contender is granted');
  await granted.release();
});

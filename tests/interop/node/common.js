'use strict';
// Shared plumbing for the Node interop cases. run.sh sets INTEROP_SERVER
// ("redlockd" or "redis") and INTEROP_NODES (comma-separated host:port, 5 nodes).
const crypto = require('node:crypto');

const KIND = process.env.INTEROP_SERVER || 'redlockd';
const NODES = (process.env.INTEROP_NODES || '')
  .split(',')
  .map((s) => s.trim())
  .filter(Boolean)
  .map((s) => {
    const i = s.lastIndexOf(':');
    return { host: s.slice(0, i), port: Number(s.slice(i + 1)) };
  });

if (NODES.length < 5) {
  throw new Error('INTEROP_NODES must list 5 nodes (run through tests/interop/run.sh)');
}

// Nodes started with redlockd's default flags (run.sh), for clients whose defaults
// store TTLs above the shared nodes' 30 s max-ttl.
const DEFAULT_NODES = (process.env.INTEROP_DEFAULT_NODES || '')
  .split(',')
  .map((s) => s.trim())
  .filter(Boolean)
  .map((s) => {
    const i = s.lastIndexOf(':');
    return { host: s.slice(0, i), port: Number(s.slice(i + 1)) };
  });

// Cases that need DEBUG CLOCK ADVANCE run only against redlockd.
const redlockdOnly = KIND === 'redlockd'
  ? {}
  : { skip: 'needs redlockd (DEBUG CLOCK); real Redis lacks it' };

function unique(prefix) {
  return `interop:${prefix}:${crypto.randomBytes(6).toString('hex')}`;
}

// Bound any promise so a server that never answers fails the case.
function within(ms, promise, what) {
  let timer;
  const timeout = new Promise((_, reject) => {
    timer = setTimeout(() => reject(new Error(`timed out after ${ms} ms: ${what}`)), ms);
  });
  return Promise.race([promise, timeout]).finally(() => clearTimeout(timer));
}

module.exports = { KIND, NODES, DEFAULT_NODES, redlockdOnly, unique, within };

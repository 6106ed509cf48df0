#!/usr/bin/env node
"use strict";
// `npx redlockd ARGS`: runs the platform package's redlockd binary with ARGS.
const { spawnSync } = require("node:child_process");
const { resolveBinary } = require("../lib/index.js");

let binary;
try {
  binary = resolveBinary();
} catch (e) {
  console.error(e.message);
  process.exit(1);
}
const r = spawnSync(binary, process.argv.slice(2), { stdio: "inherit" });
if (r.error) {
  console.error(`redlockd: cannot run ${binary}: ${r.error.message}`);
  process.exit(1);
}
if (r.signal) process.kill(process.pid, r.signal);
process.exit(r.status ?? 1);

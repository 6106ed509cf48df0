//! Lua scripting (EVAL and friends): a Lua 5.1 VM per server, Redis's `redis.*` API,
//! its conversion rules, its sandbox, and the time limit (BUSY / SCRIPT KILL).
//!
//! Why one VM per server, not per thread: a script runs holding the keyspace gate
//! exclusively, so at most one script of a server executes at any moment and one VM
//! is never contended. A per-server VM also keeps servers that share a process (tests,
//! clusters) from seeing each other's state or random seeds.

mod args;
mod bit;
mod cjson;
mod cjson_decode;
mod cmsgpack;
mod convert;
mod engine;
mod lstruct;
mod numfmt;
mod redis_api;
mod sandbox;

use crate::clock::Clock;
use crate::commands::Ctx;
use crate::protocol::{errors, Reply};
use bytes::Bytes;
use parking_lot::{Mutex, RwLock};
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

/// A server's scripting state: the script cache EVALSHA reads, the VM, and the script
/// running now (what BUSY and SCRIPT KILL look at).
pub struct Scripts {
    /// sha1 (lowercase hex) -> script body. Authoritative for EVALSHA / SCRIPT EXISTS.
    cache: RwLock<HashMap<String, Bytes>>,
    /// Created on first use and dropped by SCRIPT FLUSH (Redis resets its VM there too).
    vm: Mutex<Option<engine::Vm>>,
    running: Mutex<Option<Arc<Running>>>,
    busy_ms: u64,
    seed: Option<u64>,
}

/// The script executing now. Shared with the Lua hook (kill flag) and with connections
/// waiting for the gate (BUSY).
pub struct Running {
    /// Server-clock ms when the script started, so a manual clock drives BUSY in tests.
    pub started_ms: u64,
    clock: Clock,
    busy_ms: u64,
    killed: AtomicBool,
    /// A write command has run: SCRIPT KILL must refuse (UNKILLABLE), as in Redis.
    wrote: AtomicBool,
    warned: AtomicBool,
}

impl Running {
    fn is_busy(&self, now_ms: u64) -> bool {
        now_ms.saturating_sub(self.started_ms) > self.busy_ms
    }

    pub(crate) fn killed(&self) -> bool {
        self.killed.load(Ordering::Relaxed)
    }

    /// Called from the Lua hook: logs once when the script passes the time limit.
    fn check_slow(&self) {
        if self.is_busy(self.clock.now_ms()) && !self.warned.swap(true, Ordering::Relaxed) {
            tracing::warn!(
                busy_ms = self.busy_ms,
                "slow script detected: still running; other clients get BUSY, SCRIPT KILL can stop it"
            );
        }
    }
}

/// How a script was named by the caller.
pub enum Source<'a> {
    /// EVAL: the body; cached under its sha1 once it compiles.
    Body(&'a Bytes),
    /// EVALSHA: a sha1 already checked to be 40 bytes.
    Sha(&'a [u8]),
}

/// What the caller passed besides the script.
pub struct Call<'a> {
    pub keys: &'a [Bytes],
    pub argv: &'a [Bytes],
    /// EVAL_RO / EVALSHA_RO: write commands are refused.
    pub read_only: bool,
}

impl Scripts {
    pub fn new(busy_ms: u64, seed: Option<u64>) -> Scripts {
        Scripts {
            cache: RwLock::new(HashMap::new()),
            vm: Mutex::new(None),
            running: Mutex::new(None),
            busy_ms,
            seed,
        }
    }

    /// True while a script has run longer than the time limit: other commands get BUSY.
    pub fn is_busy(&self, now_ms: u64) -> bool {
        self.running
            .lock()
            .as_ref()
            .is_some_and(|r| r.is_busy(now_ms))
    }

    /// True while a script executes (tests wait for this before driving the clock).
    pub fn is_running(&self) -> bool {
        self.running.lock().is_some()
    }

    /// SCRIPT KILL.
    pub fn kill(&self) -> Reply {
        match self.running.lock().as_ref() {
            None => Reply::error(errors::NOTBUSY),
            Some(r) if r.wrote.load(Ordering::SeqCst) => Reply::error(errors::UNKILLABLE),
            Some(r) => {
                r.killed.store(true, Ordering::SeqCst);
                Reply::Ok
            }
        }
    }

    /// Stops a running script whatever it did (the server is going away).
    pub fn kill_for_shutdown(&self) {
        if let Some(r) = self.running.lock().as_ref() {
            r.killed.store(true, Ordering::SeqCst);
        }
    }

    /// SCRIPT LOAD: compiles (so a syntax error is reported now) and caches.
    pub fn load(&self, body: &Bytes) -> Reply {
        let sha = sha1hex(body);
        let mut vm = self.vm.lock();
        let vm = match self.vm_or_create(&mut vm) {
            Ok(vm) => vm,
            Err(e) => return e,
        };
        if let Err(e) = vm.compile(&sha, body) {
            return e;
        }
        self.cache.write().insert(sha.clone(), body.clone());
        Reply::bulk(sha)
    }

    /// SCRIPT EXISTS for one sha (any case, as Redis).
    pub fn exists(&self, sha: &[u8]) -> bool {
        let sha = String::from_utf8_lossy(sha).to_ascii_lowercase();
        self.cache.read().contains_key(&sha)
    }

    /// SCRIPT FLUSH: forgets every script and resets the VM.
    pub fn flush(&self) {
        self.cache.write().clear();
        *self.vm.lock() = None;
    }

    fn vm_or_create<'v>(
        &self,
        slot: &'v mut Option<engine::Vm>,
    ) -> Result<&'v mut engine::Vm, Reply> {
        if slot.is_none() {
            let vm = engine::Vm::new(self.seed).map_err(|e| {
                tracing::error!("creating the Lua VM failed: {e}");
                Reply::error(format!("ERR Error creating the Lua VM: {e}"))
            })?;
            *slot = Some(vm);
        }
        // Set just above when it was empty.
        slot.as_mut()
            .ok_or_else(|| Reply::error("ERR Lua VM unavailable"))
    }

    /// Runs a script for EVAL / EVALSHA (and their _RO forms). The caller holds the
    /// keyspace gate exclusively, so the script is atomic.
    pub fn run(&self, ctx: &mut Ctx, source: Source, call: Call) -> Reply {
        // EVALSHA of a script this VM has compiled (lock clients' steady state): one
        // lookup, no allocation. Anything else takes the general path below.
        if let Source::Sha(sha) = source {
            let mut lower = [0u8; 40];
            if sha.len() == lower.len() {
                lower.copy_from_slice(sha);
                lower.make_ascii_lowercase();
                if let Ok(sha) = std::str::from_utf8(&lower) {
                    let mut vm_slot = self.vm.lock();
                    if let Some(vm) = vm_slot.as_mut() {
                        if let Some(function) = vm.compiled(sha) {
                            return self.execute(ctx, vm, &function, sha, call);
                        }
                    }
                }
            }
        }
        let (sha, body) = match source {
            Source::Body(body) => (sha1hex(body), Some(body)),
            Source::Sha(sha) => {
                let sha = String::from_utf8_lossy(sha).to_ascii_lowercase();
                if !self.cache.read().contains_key(&sha) {
                    return Reply::error(errors::NOSCRIPT);
                }
                (sha, None)
            }
        };
        let mut vm_slot = self.vm.lock();
        let vm = match self.vm_or_create(&mut vm_slot) {
            Ok(vm) => vm,
            Err(e) => return e,
        };
        let function = match body {
            Some(body) => match vm.compile(&sha, body) {
                Ok(f) => {
                    self.cache
                        .write()
                        .entry(sha.clone())
                        .or_insert_with(|| body.clone());
                    f
                }
                Err(e) => return e,
            },
            None => {
                let cached = self.cache.read().get(&sha).cloned();
                let Some(body) = cached else {
                    return Reply::error(errors::NOSCRIPT);
                };
                match vm.compile(&sha, &body) {
                    Ok(f) => f,
                    Err(e) => return e,
                }
            }
        };
        self.execute(ctx, vm, &function, &sha, call)
    }

    /// Runs a compiled script, registered as the running script (BUSY, SCRIPT KILL).
    fn execute(
        &self,
        ctx: &mut Ctx,
        vm: &mut engine::Vm,
        function: &mlua::Function,
        sha: &str,
        call: Call,
    ) -> Reply {
        let running = Arc::new(Running {
            // The caller read the clock just after taking the gate.
            started_ms: ctx.now_ms,
            clock: ctx.shared.clock.clone(),
            busy_ms: self.busy_ms,
            killed: AtomicBool::new(false),
            wrote: AtomicBool::new(false),
            warned: AtomicBool::new(false),
        });
        *self.running.lock() = Some(running.clone());
        let _clear = ClearRunning(&self.running);
        vm.execute(ctx, function, sha, call, running)
    }
}

/// Clears the running-script slot however the run ends.
struct ClearRunning<'a>(&'a Mutex<Option<Arc<Running>>>);

impl Drop for ClearRunning<'_> {
    fn drop(&mut self) {
        *self.0.lock() = None;
    }
}

/// Lowercase hex SHA1 of the exact bytes (redsync hard-codes these).
pub fn sha1hex(body: &[u8]) -> String {
    sha1_smol::Sha1::from(body).digest().to_string()
}

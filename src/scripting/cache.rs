//! The script cache: scripts compiled once and kept by SHA-1 (EVAL's bodies, SCRIPT
//! LOAD), their metadata, and what evicts them (EVAL bodies past the cache's bound;
//! SCRIPT FLUSH).

use super::*;

#[derive(Default)]
pub(super) struct Cache {
    pub(super) scripts: HashMap<String, Cached>,
    /// How many of `scripts` came from EVAL (and can be evicted).
    pub(super) evictable: usize,
    /// Evicted since start (INFO's `evicted_scripts`).
    pub(super) evicted: u64,
}

pub(super) struct Cached {
    pub(super) body: Bytes,
    pub(super) meta: Arc<ScriptMeta>,
}

/// A cached script's eviction bookkeeping, shared with the VM's compiled entry so that
/// the EVALSHA fast path marks a use without a cache lookup.
pub struct ScriptMeta {
    /// Created by EVAL and not since loaded with SCRIPT LOAD.
    evictable: AtomicBool,
    /// `Scripts::tick` at the last run.
    last_used: AtomicU64,
}

impl Scripts {
    /// SCRIPT LOAD: compiles (so a syntax error is reported now) and caches. A script
    /// that EVAL created is kept from now on, as in Redis.
    pub fn load(&self, body: &Bytes) -> Reply {
        let sha = sha1hex(body);
        let mut vm_slot = self.vm.lock();
        let outcome = catch_unwind(AssertUnwindSafe(|| -> Result<(), Reply> {
            let vm = self.vm_or_create(&mut vm_slot)?;
            let meta = self.meta_for(&sha, false);
            self.compile(vm, &sha, body, &meta)?;
            self.remember(vm, &sha, body, meta, false);
            Ok(())
        }));
        match outcome {
            Ok(Ok(())) => Reply::bulk(sha),
            Ok(Err(e)) => e,
            Err(panic) => engine_panicked(&mut vm_slot, &panic),
        }
    }

    /// SCRIPT EXISTS for one sha (any case, as Redis).
    pub fn exists(&self, sha: &[u8]) -> bool {
        let sha = String::from_utf8_lossy(sha).to_ascii_lowercase();
        self.cache.read().scripts.contains_key(&sha)
    }

    /// How many scripts are cached, and how many EVAL scripts were evicted so far.
    pub fn counts(&self) -> (usize, u64) {
        let cache = self.cache.read();
        (cache.scripts.len(), cache.evicted)
    }

    /// SCRIPT FLUSH: forgets every script and resets the VM.
    pub fn flush(&self) {
        let evicted = self.cache.read().evicted;
        *self.cache.write() = Cache {
            evicted,
            ..Cache::default()
        };
        *self.vm.lock() = None;
        self.shebang_flags.write().clear();
        self.any_shebang.store(false, Ordering::Relaxed);
    }

    /// Compiles an EVAL script: its shebang (if any) is checked and its flags kept;
    /// the shebang line is left out of the code but its newline stays, so error line
    /// numbers are the user's (as Redis does).
    pub(super) fn compile(
        &self,
        vm: &mut engine::Vm,
        sha: &str,
        body: &[u8],
        meta: &Arc<ScriptMeta>,
    ) -> Result<mlua::Function, Reply> {
        let (flags, skip) =
            flags::eval_shebang(body).map_err(|e| Reply::error(functions::one_line(&e)))?;
        let f = vm.compile(sha, &body[skip..], meta)?;
        if flags & flags::EVAL_COMPAT == 0 {
            self.shebang_flags.write().insert(sha.to_string(), flags);
            self.any_shebang.store(true, Ordering::Relaxed);
        }
        Ok(f)
    }

    /// The bookkeeping of a cached script, or a fresh one for a script about to be
    /// compiled (`evictable`: it comes from EVAL).
    pub(super) fn meta_for(&self, sha: &str, evictable: bool) -> Arc<ScriptMeta> {
        if let Some(c) = self.cache.read().scripts.get(sha) {
            return c.meta.clone();
        }
        Arc::new(ScriptMeta {
            evictable: AtomicBool::new(evictable),
            last_used: AtomicU64::new(self.tick.load(Ordering::Relaxed)),
        })
    }

    /// Caches a script just compiled in `vm`. SCRIPT LOAD (`evictable` false) makes an
    /// EVAL script permanent; a new EVAL script may evict the least recently used one.
    pub(super) fn remember(
        &self,
        vm: &mut engine::Vm,
        sha: &str,
        body: &Bytes,
        meta: Arc<ScriptMeta>,
        evictable: bool,
    ) {
        let mut cache = self.cache.write();
        let cache = &mut *cache;
        match cache.scripts.get(sha) {
            Some(c) => {
                if !evictable && c.meta.evictable.swap(false, Ordering::Relaxed) {
                    cache.evictable -= 1;
                }
                return;
            }
            None => {
                cache.scripts.insert(
                    sha.to_string(),
                    Cached {
                        body: body.clone(),
                        meta,
                    },
                );
                if !evictable {
                    return;
                }
                cache.evictable += 1;
            }
        }
        while cache.evictable > EVAL_SCRIPTS_KEPT {
            let oldest = cache
                .scripts
                .iter()
                .filter(|(s, c)| c.meta.evictable.load(Ordering::Relaxed) && s.as_str() != sha)
                .min_by_key(|(_, c)| c.meta.last_used.load(Ordering::Relaxed))
                .map(|(s, _)| s.clone());
            let Some(oldest) = oldest else { break };
            cache.scripts.remove(&oldest);
            cache.evictable -= 1;
            cache.evicted += 1;
            vm.forget(&oldest);
        }
    }

    pub(super) fn touch(&self, meta: &ScriptMeta) {
        // A load and a store, not an atomic add: every caller holds the VM's lock (the
        // one writer at a time), and other threads only read the tick.
        let now = self.tick.load(Ordering::Relaxed) + 1;
        self.tick.store(now, Ordering::Relaxed);
        meta.last_used.store(now, Ordering::Relaxed);
    }
}

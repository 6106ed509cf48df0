//! The Lua VM's memory limit, lifted around our own calls into the Lua API (building
//! KEYS/ARGV, converting replies): the script's code runs under it, our code does not.
//! What a conversion leaves in the script (a redis.call reply) still counts: past the
//! limit, the next allocation fails (`over_limit`, checked by redis.call).

use super::engine::MEMORY_LIMIT;
use super::lua_errors::ScriptError;
use mlua::{ffi, Lua};

/// Most bytes our Rust code builds from a script's values in one go (cjson.encode,
/// cmsgpack.pack, struct.pack, the arguments of one redis.call, the script's reply):
/// what the VM itself may hold. These live on the process's heap, not the VM's, so
/// the VM's limit does not see them: a table of 100,000 references to one 1 MB string
/// is 2 MB of Lua memory and would encode to 100 GB, and Rust aborts the process when
/// an allocation fails. Past this the function raises Lua's out-of-memory text.
pub(super) const BUILD_LIMIT: usize = MEMORY_LIMIT;

/// Lua's own text for an allocation refused by the limit.
pub(super) const OUT_OF_MEMORY: &str = "not enough memory";

/// The error a library function raises when what it builds passes `BUILD_LIMIT`.
pub(super) fn build_too_big() -> mlua::Error {
    mlua::Error::external(ScriptError::Lua(OUT_OF_MEMORY.into()))
}

/// Runs `f`, our own calls into the Lua API (building KEYS/ARGV, converting replies
/// both ways), with the VM's memory limit lifted.
///
/// Why: while a limit is set, mlua makes every string, table and `raw_set` a protected
/// call (a fresh C closure plus `lua_pcall`, so that a refused allocation cannot
/// longjmp through Rust); that was about half the instructions of a compare-and-delete
/// EVALSHA. With no limit an allocation cannot fail (a real out-of-memory aborts the
/// process), so mlua calls the API directly. What `f` allocates is bounded by the
/// request or by a command's reply, both already in memory; the script's own code
/// still runs under the limit, which is what stops a runaway script.
pub(super) fn unlimited<R>(lua: &Lua, f: impl FnOnce() -> R) -> R {
    struct Restore<'a>(&'a Lua, usize);
    impl Drop for Restore<'_> {
        fn drop(&mut self) {
            let _ = self.0.set_memory_limit(self.1);
        }
    }
    let previous = lua.set_memory_limit(0).unwrap_or(MEMORY_LIMIT);
    let _restore = Restore(lua, previous);
    f()
}

/// Whether the VM holds more than its limit: after a redis.call reply was converted
/// with the limit lifted, the script must not keep what it could not have allocated
/// itself (40 copies of a large LRANGE reply would otherwise grow it without bound).
///
/// # Safety
/// `state` is a state of a VM made by this crate, on the thread running it.
pub(super) unsafe fn over_limit(state: *mut ffi::lua_State) -> bool {
    if RAW_LIMIT.get() == Some(&true) {
        let mut ud = std::ptr::null_mut();
        ffi::lua_getallocf(state, &mut ud);
        let words = ud.cast::<isize>();
        let limit = *words.add(1);
        return limit > 0 && *words > limit;
    }
    Lua::get_or_init_from_ptr(state).used_memory() > MEMORY_LIMIT
}

/// Whether mlua keeps the memory limit where `unlimited_raw` writes it: checked once,
/// on the first VM (`raw_limit_checks`).
pub(super) static RAW_LIMIT: std::sync::OnceLock<bool> = std::sync::OnceLock::new();

/// mlua's allocator state (the `ud` of the state's allocator function) starts with
/// two `isize`s, the bytes in use and the limit (`MemoryState`, `repr(C)`, in mlua
/// 0.11). Rather than trust that, this checks it on a new VM: the second word must
/// follow `set_memory_limit`, and the first must be `used_memory`. If either fails,
/// `unlimited_raw` keeps to mlua's API (slower, same behaviour).
pub(super) fn raw_limit_checks(lua: &Lua, state: *mut ffi::lua_State) -> bool {
    // SAFETY: the main state of `lua`, no run in progress; the words are read only
    // after the allocator's state is known to be there (non-null), and mlua 0.11's is
    // three words long.
    unsafe {
        let mut ud = std::ptr::null_mut();
        ffi::lua_getallocf(state, &mut ud);
        if ud.is_null() {
            return false;
        }
        let words = ud.cast::<isize>();
        let follows = [MEMORY_LIMIT - 1, MEMORY_LIMIT]
            .into_iter()
            .all(|probe| lua.set_memory_limit(probe).is_ok() && *words.add(1) == probe as isize);
        follows && *words == lua.used_memory() as isize
    }
}

/// `unlimited` for a run's hot path (KEYS/ARGV, a reply pushed into the script): the
/// limit is cleared and put back with two plain stores to mlua's allocator state
/// (checked by `raw_limit_checks`), where `set_memory_limit` takes mlua's lock twice
/// (an Arc clone and a reentrant mutex: 4 atomic instructions per call). mlua reads
/// the same field to decide whether its own calls need protection.
///
/// # Safety
/// `state` is a state of `lua`, on the thread running it, with no mlua call on it
/// holding the allocator state.
pub(super) unsafe fn unlimited_raw<R>(
    state: *mut ffi::lua_State,
    lua: &Lua,
    f: impl FnOnce() -> R,
) -> R {
    if RAW_LIMIT.get() != Some(&true) {
        return unlimited(lua, f);
    }
    struct Restore(*mut isize, isize);
    impl Drop for Restore {
        fn drop(&mut self) {
            // SAFETY: see `unlimited_raw`.
            unsafe { *self.0 = self.1 }
        }
    }
    let mut ud = std::ptr::null_mut();
    ffi::lua_getallocf(state, &mut ud);
    let limit = ud.cast::<isize>().add(1);
    let _restore = Restore(limit, std::mem::replace(&mut *limit, 0));
    f()
}

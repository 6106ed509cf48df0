//! KEYS and ARGV: set on the VM's raw stack for an EVAL run, or built as tables for a
//! function's arguments.

use bytes::Bytes;
use mlua::{ffi, Lua, Table};
use std::ffi::c_int;

/// Sets `KEYS` and `ARGV` in `globals` to arrays of `keys` and `argv`, with Lua's C
/// API straight on the main state. Through mlua's safe API every string and every
/// `raw_set` took and dropped a registry reference (5,900 of the 24,000 instructions
/// of a compare-and-delete EVALSHA), and `exec_raw` made a protected call with a fresh
/// C closure for each run (another ~1,500).
///
/// No protected call is needed: it runs with the memory limit lifted (`unlimited`),
/// so no allocation raises (mlua calls the API unprotected in that state too), and
/// raw sets with string and integer keys raise nothing else. Returns false, having
/// changed nothing, if the stack cannot grow.
///
/// The previous run's table is refilled when it has as many items as this run needs
/// and the script left it a plain array (no metatable, no key past its length): what
/// a script sees is then what a fresh table holds. Redis builds new ones per run; two
/// tables per run were a third of the Lua heap's allocations and garbage. A script
/// cannot keep a reference to them past its run (its globals are read-only), so
/// nobody sees the refill. Anything else (another count, a field set on KEYS, a
/// metatable) gets a new table.
///
/// # Safety
/// `state` is the VM's main state with no mlua call running on it, `globals_ref` a
/// registry reference to the globals table, `names_ref` to the strings "KEYS" and
/// "ARGV", and the memory limit is lifted. Indices
/// fit c_int: a request has at most 1M arguments (protocol::decode bounds the count).
pub(super) unsafe fn set_keys_argv(
    state: *mut ffi::lua_State,
    globals_ref: c_int,
    names_ref: [c_int; 2],
    keys: &[Bytes],
    argv: &[Bytes],
) -> bool {
    // globals, a name, a table, a value; reusable_array needs 2 above the table.
    if ffi::lua_checkstack(state, 5) == 0 {
        return false;
    }
    let top = ffi::lua_gettop(state);
    ffi::lua_rawgeti_(state, ffi::LUA_REGISTRYINDEX, globals_ref);
    let globals = top + 1;
    for (name, items) in names_ref.into_iter().zip([keys, argv]) {
        ffi::lua_rawgeti_(state, ffi::LUA_REGISTRYINDEX, name);
        ffi::lua_pushvalue(state, -1);
        ffi::lua_rawget(state, globals);
        // stack: name, previous value
        if reusable_array(state) != Some(items.len()) {
            // As Redis's luaCreateArray: an empty table filled in order, so its array
            // part grows as Redis's does (`#` of a table with holes depends on it).
            ffi::lua_settop(state, globals + 1);
            ffi::lua_createtable(state, 0, 0);
        }
        for (i, item) in items.iter().enumerate() {
            ffi::lua_pushlstring(state, item.as_ptr().cast(), item.len());
            ffi::lua_rawseti_(state, globals + 2, i as c_int + 1);
        }
        ffi::lua_rawset(state, globals);
    }
    ffi::lua_settop(state, top);
    true
}

/// The length of the table on top of the stack if it is a plain array (no metatable,
/// no key past its length), else None. Leaves the stack as it found it.
///
/// # Safety
/// `state` has 2 free stack slots.
unsafe fn reusable_array(state: *mut ffi::lua_State) -> Option<usize> {
    if ffi::lua_type(state, -1) != ffi::LUA_TTABLE {
        return None;
    }
    if ffi::lua_getmetatable(state, -1) != 0 {
        ffi::lua_pop(state, 1);
        return None;
    }
    let len = ffi::lua_objlen(state, -1);
    if len == 0 {
        ffi::lua_pushnil(state);
    } else {
        ffi::lua_pushinteger(state, len as ffi::lua_Integer);
    }
    if ffi::lua_next(state, -2) != 0 {
        ffi::lua_pop(state, 2);
        return None;
    }
    Some(len)
}

/// A Lua array of strings (a function's KEYS and ARGV arguments), grown from empty as
/// Redis's luaCreateArray does (see `set_keys_argv`).
pub(super) fn string_table(lua: &Lua, items: &[Bytes]) -> mlua::Result<Table> {
    let t = lua.create_table()?;
    for (i, item) in items.iter().enumerate() {
        t.raw_set(i + 1, lua.create_string(item)?)?;
    }
    Ok(t)
}

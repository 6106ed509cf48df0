//! The sandbox scripts run in: read-only globals and libraries (built in Lua, SETUP),
//! guarded rawset/setmetatable, and a seeded math.random.

use super::lua_errors::{raise_lua, type_name, ScriptError};
use mlua::{Function, Lua, Table, Value, Variadic};
use parking_lot::Mutex;
use rand::Rng;
use std::sync::Arc;

/// rawset that refuses the sandbox's read-only tables (_G and the libraries).
pub(super) fn guarded_rawset(lua: &Lua, protected: Table) -> mlua::Result<Function> {
    lua.create_function(move |lua, (t, k, v): (Value, Value, Value)| {
        let Value::Table(t) = t else {
            return Err(raise_lua(
                lua,
                &format!(
                    "bad argument #1 to 'rawset' (table expected, got {})",
                    type_name(&t)
                ),
            ));
        };
        if protected.raw_get::<bool>(&t).unwrap_or(false) {
            return Err(mlua::Error::external(ScriptError::Lua(
                "Attempt to modify a readonly table".into(),
            )));
        }
        t.raw_set(k, v)?;
        Ok(t)
    })
}

/// setmetatable that refuses the sandbox's read-only tables and, as Lua's own,
/// a table whose metatable has `__metatable`.
pub(super) fn guarded_setmetatable(lua: &Lua, protected: Table) -> mlua::Result<Function> {
    lua.create_function(move |lua, (t, mt): (Value, Value)| {
        let Value::Table(t) = t else {
            return Err(raise_lua(
                lua,
                &format!(
                    "bad argument #1 to 'setmetatable' (table expected, got {})",
                    type_name(&t)
                ),
            ));
        };
        let mt = match mt {
            Value::Nil => None,
            Value::Table(mt) => Some(mt),
            _ => {
                return Err(raise_lua(
                    lua,
                    "bad argument #2 to 'setmetatable' (nil or table expected)",
                ))
            }
        };
        if protected.raw_get::<bool>(&t).unwrap_or(false) {
            return Err(mlua::Error::external(ScriptError::Lua(
                "Attempt to modify a readonly table".into(),
            )));
        }
        if let Some(old) = t.metatable() {
            if !old.raw_get::<Value>("__metatable")?.is_nil() {
                return Err(raise_lua(lua, "cannot change a protected metatable"));
            }
        }
        t.set_metatable(mt)?;
        Ok(t)
    })
}

/// math.random with Lua 5.1's argument rules, from a per-VM generator seeded by the
/// server's `seed` (repeatable tests) instead of the process-wide C rand().
pub(super) fn random(lua: &Lua, rng: Arc<Mutex<rand::rngs::SmallRng>>) -> mlua::Result<Function> {
    lua.create_function(move |lua, args: Variadic<Value>| {
        let int = |i: usize| -> Result<f64, String> {
            let v = args.get(i).cloned().unwrap_or(Value::Nil);
            let got = if v.is_nil() {
                "no value"
            } else {
                v.type_name()
            };
            match lua.coerce_number(v) {
                Ok(Some(n)) => Ok(n.trunc()),
                _ => Err(format!(
                    "bad argument #{} to 'random' (number expected, got {got})",
                    i + 1
                )),
            }
        };
        let r: f64 = rng.lock().random();
        let out = match args.len() {
            0 => Ok(r),
            1 => int(0).and_then(|m| {
                if m < 1.0 {
                    Err("bad argument #1 to 'random' (interval is empty)".into())
                } else {
                    Ok((r * m).floor() + 1.0)
                }
            }),
            2 => int(0).and_then(|l| {
                int(1).and_then(|u| {
                    if l > u {
                        Err("bad argument #2 to 'random' (interval is empty)".into())
                    } else {
                        Ok((r * (u - l + 1.0)).floor() + l)
                    }
                })
            }),
            _ => Err("wrong number of arguments".to_string()),
        };
        Ok(match out {
            Ok(n) => (Some(n), None),
            Err(e) => (None, Some(e)),
        })
    })
}

/// The sandbox and the `redis` table, built once per VM. Runs with the real globals
/// (which scripts never see) and returns the allowed globals `R`, the script
/// environment `G` and the runner.
pub(super) const SETUP: &str = r#"
local imp = ...
local error, type, rawget, rawset, setmetatable, getmetatable, tostring, select =
      error, type, rawget, rawset, setmetatable, getmetatable, tostring, select
local pcall, xpcall, loadstring, setfenv, pairs, ipairs =
      pcall, xpcall, loadstring, setfenv, pairs, ipairs
local concat, sbyte, ssub, sfind = table.concat, string.byte, string.sub, string.find
local killed, unwrap_error = imp.killed, imp.unwrap_error

local protected = setmetatable({}, {__mode = 'k'})
local function ro_newindex() error('Attempt to modify a readonly table', 2) end
local function readonly(t)
  local p = setmetatable({}, {__index = t, __newindex = ro_newindex, __metatable = false})
  protected[p] = true
  return p
end
local function copy(t)
  local c = {}
  for k, v in pairs(t) do c[k] = v end
  return c
end

-- A killed script must not survive by catching the kill; pcall also turns Redis error
-- tables into their text, as Redis 7's pcall does.
local function after_pcall(ok, ...)
  if ok then return true, ... end
  if killed() then error((...), 0) end
  local e = ...
  if type(e) == 'userdata' then return false, unwrap_error(e) end
  if type(e) == 'table' then
    local m = rawget(e, 'err')
    if type(m) == 'string' then return false, m end
  end
  return false, e
end
local function after_xpcall(ok, ...)
  if not ok and killed() then error((...), 0) end
  return ok, ...
end

local redis = {}
redis.pcall = imp.pcall
redis.call = imp.call
local function err_text(s)
  if ssub(s, 1, 1) == '-' then s = ssub(s, 2) end
  if not sfind(s, ' ', 1, true) then s = 'ERR ' .. s end
  return s
end
redis.error_reply = function(...)
  local s = ...
  if select('#', ...) ~= 1 or type(s) ~= 'string' then
    return {err = 'ERR wrong number or type of arguments'}
  end
  return {err = err_text(s)}
end
redis.status_reply = function(...)
  local s = ...
  if select('#', ...) ~= 1 or type(s) ~= 'string' then
    return {err = 'ERR wrong number or type of arguments'}
  end
  return {ok = s}
end
redis.sha1hex = imp.sha1hex
redis.log = imp.log
redis.setresp = imp.setresp
redis.acl_check_cmd = imp.acl_check_cmd
redis.breakpoint = function() return false end
redis.debug = function() end
redis.replicate_commands = function() return true end
redis.set_repl = function() end
redis.LOG_DEBUG, redis.LOG_VERBOSE, redis.LOG_NOTICE, redis.LOG_WARNING = 0, 1, 2, 3
redis.REPL_NONE, redis.REPL_AOF, redis.REPL_SLAVE, redis.REPL_REPLICA, redis.REPL_ALL = 0, 1, 2, 2, 3
redis.REDIS_VERSION = imp.version
redis.REDIS_VERSION_NUM = imp.version_num

local R = {}
for _, name in ipairs({'assert', 'error', 'ipairs', 'pairs', 'next', 'rawequal', 'rawget',
                       'select', 'tonumber', 'tostring', 'type', 'unpack', 'gcinfo',
                       'collectgarbage', 'getmetatable', '_VERSION'}) do
  R[name] = _G[name]
end
local function no_global(_, k)
  error("Script attempted to access nonexistent global variable '" .. tostring(k) .. "'", 2)
end
-- getmetatable(_G) gives a read-only table, as Redis's (whose _G metatable is read-only).
local G = setmetatable({}, {__index = R, __newindex = ro_newindex,
                            __metatable = readonly({__index = no_global})})
protected[G] = true
setmetatable(R, {__index = no_global})
R._G = G
-- rawset and setmetatable: guarded versions are added from Rust.
R.pcall = function(...) return after_pcall(pcall(...)) end
R.xpcall = function(f, h) return after_xpcall(xpcall(f, h)) end
-- Code loaded at run time gets the sandboxed environment too; bytecode is refused
-- (a crafted chunk can corrupt the VM).
R.loadstring = function(s, name)
  if type(s) == 'string' and sbyte(s, 1) == 27 then
    return nil, 'loading binary chunks is not allowed'
  end
  local f, e = loadstring(s, name)
  if f then setfenv(f, G) end
  return f, e
end
R.load = function(reader, name)
  if type(reader) ~= 'function' then
    error("bad argument #1 to 'load' (function expected, got " .. type(reader) .. ")", 2)
  end
  local parts, n = {}, 0
  while true do
    local p = reader()
    if p == nil or p == '' then break end
    if type(p) ~= 'string' then return nil, 'reader function must return a string' end
    n = n + 1
    parts[n] = p
  end
  return R.loadstring(concat(parts), name)
end

local co = copy(coroutine)
local resume = coroutine.resume
co.resume = function(...) return after_xpcall(resume(...)) end
R.coroutine = readonly(co)
R.string = readonly(string)
getmetatable('').__metatable = readonly({__index = R.string})
R.table = readonly(table)
local m = copy(math)
m.random = imp.random
m.randomseed = imp.randomseed
R.math = readonly(m)
R.cjson = readonly(imp.cjson)
R.bit = readonly(imp.bit)
R.cmsgpack = readonly(imp.cmsgpack)
R.struct = readonly(imp.struct)
R.redis = readonly(redis)

return {R = R, G = G, protected = protected}
"#;

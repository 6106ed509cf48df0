//! The `bit` library Redis ships (LuaBitOp): 32-bit operations on Lua numbers.
//!
//! LuaBitOp normalises an argument by adding 2^52 + 2^51 and keeping the low 32 bits
//! of the double, which rounds to nearest-even and wraps modulo 2^32; results are signed
//! 32-bit numbers. Each function returns `(result, error)`; a Lua shim raises the error
//! at the caller's line, as luaL_error would.

use mlua::{Function, Lua, Table, Value, Variadic};

type BitResult = (Option<f64>, Option<String>);

/// LuaBitOp's `barg`: rounds and wraps a number into a signed 32-bit integer.
pub fn tobit(x: f64) -> i32 {
    (x + 6_755_399_441_055_744.0).to_bits() as u32 as i32
}

fn arg(lua: &Lua, args: &[Value], i: usize, name: &str) -> Result<i32, String> {
    let v = args.get(i).cloned().unwrap_or(Value::Nil);
    let n = match &v {
        Value::Integer(n) => Some(*n as f64),
        Value::Number(n) => Some(*n),
        Value::String(_) => lua.coerce_number(v.clone()).ok().flatten(),
        _ => None,
    };
    n.map(tobit).ok_or_else(|| {
        format!(
            "bad argument #{} to '{}' (number expected, got {})",
            i + 1,
            name,
            type_name(&v)
        )
    })
}

fn type_name(v: &Value) -> &'static str {
    match v {
        Value::Nil => "no value",
        other => other.type_name(),
    }
}

fn unary(lua: &Lua, name: &'static str, op: fn(i32) -> i32) -> mlua::Result<Function> {
    lua.create_function(
        move |lua, args: Variadic<Value>| -> mlua::Result<BitResult> {
            Ok(match arg(lua, &args, 0, name) {
                Ok(x) => (Some(op(x) as f64), None),
                Err(e) => (None, Some(e)),
            })
        },
    )
}

/// Folds every argument (band, bor, bxor).
fn fold(lua: &Lua, name: &'static str, op: fn(i32, i32) -> i32) -> mlua::Result<Function> {
    lua.create_function(
        move |lua, args: Variadic<Value>| -> mlua::Result<BitResult> {
            let mut acc = match arg(lua, &args, 0, name) {
                Ok(x) => x,
                Err(e) => return Ok((None, Some(e))),
            };
            for i in 1..args.len() {
                match arg(lua, &args, i, name) {
                    Ok(x) => acc = op(acc, x),
                    Err(e) => return Ok((None, Some(e))),
                }
            }
            Ok((Some(acc as f64), None))
        },
    )
}

/// Shifts and rotations: the count is taken modulo 32.
fn shift(lua: &Lua, name: &'static str, op: fn(i32, u32) -> i32) -> mlua::Result<Function> {
    lua.create_function(
        move |lua, args: Variadic<Value>| -> mlua::Result<BitResult> {
            let x = match arg(lua, &args, 0, name) {
                Ok(x) => x,
                Err(e) => return Ok((None, Some(e))),
            };
            let n = match arg(lua, &args, 1, name) {
                Ok(n) => (n as u32) & 31,
                Err(e) => return Ok((None, Some(e))),
            };
            Ok((Some(op(x, n) as f64), None))
        },
    )
}

fn tohex(lua: &Lua) -> mlua::Result<Function> {
    lua.create_function(
        |lua, args: Variadic<Value>| -> mlua::Result<(Option<String>, Option<String>)> {
            let x = match arg(lua, &args, 0, "tohex") {
                Ok(x) => x as u32,
                Err(e) => return Ok((None, Some(e))),
            };
            let mut n = if args.len() > 1 {
                match arg(lua, &args, 1, "tohex") {
                    Ok(n) => n,
                    Err(e) => return Ok((None, Some(e))),
                }
            } else {
                8
            };
            let upper = n < 0;
            if upper {
                n = n.saturating_neg();
            }
            let n = n.clamp(1, 8) as usize;
            let full = if upper {
                format!("{x:08X}")
            } else {
                format!("{x:08x}")
            };
            Ok((Some(full[8 - n..].to_string()), None))
        },
    )
}

/// The raw functions; the engine wraps each in an error-raising shim.
pub fn table(lua: &Lua) -> mlua::Result<Table> {
    let t = lua.create_table()?;
    t.set("tobit", unary(lua, "tobit", |x| x)?)?;
    t.set("bnot", unary(lua, "bnot", |x| !x)?)?;
    t.set("bswap", unary(lua, "bswap", i32::swap_bytes)?)?;
    t.set("band", fold(lua, "band", |a, b| a & b)?)?;
    t.set("bor", fold(lua, "bor", |a, b| a | b)?)?;
    t.set("bxor", fold(lua, "bxor", |a, b| a ^ b)?)?;
    t.set(
        "lshift",
        shift(lua, "lshift", |x, n| ((x as u32) << n) as i32)?,
    )?;
    t.set(
        "rshift",
        shift(lua, "rshift", |x, n| ((x as u32) >> n) as i32)?,
    )?;
    t.set("arshift", shift(lua, "arshift", |x, n| x >> n)?)?;
    t.set(
        "rol",
        shift(lua, "rol", |x, n| (x as u32).rotate_left(n) as i32)?,
    )?;
    t.set(
        "ror",
        shift(lua, "ror", |x, n| (x as u32).rotate_right(n) as i32)?,
    )?;
    t.set("tohex", tohex(lua)?)?;
    Ok(t)
}

#[cfg(test)]
mod tests {
    use super::tobit;

    #[test]
    fn normalises_like_luabitop() {
        assert_eq!(tobit(1.5), 2);
        assert_eq!(tobit(2.5), 2);
        assert_eq!(tobit(-1.0), -1);
        assert_eq!(tobit(4294967301.0), 5);
        assert_eq!(tobit(2147483648.0), i32::MIN);
    }
}

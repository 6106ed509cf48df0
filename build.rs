//! Builds the server's C: its one C file (src/commands/families/long_double.c:
//! INCRBYFLOAT's long double arithmetic, as Redis does it) and Lua 5.1.5 as patched for
//! redlockd (vendor/lua-5.1.5, linked in place of mlua's own: mlua-sys's `external`);
//! and tells the test suite whether `redis-server` is on PATH: tests that compare with
//! a real Redis are marked `#[cfg_attr(not(have_redis_server), ignore = ...)]`, so the
//! summary says "ignored" where it is missing instead of passing silently.

fn main() {
    println!("cargo::rerun-if-changed=src/commands/families/long_double.c");
    if std::env::var_os("CARGO_FEATURE_SERVER").is_some() {
        cc::Build::new()
            .file("src/commands/families/long_double.c")
            .compile("redlockd_long_double");
        lua();
    }
    println!("cargo::rustc-check-cfg=cfg(have_redis_server)");
    // Set by .cargo/config.toml: the server's runtime serves first come, first served
    // (`Server::runtime`).
    println!("cargo::rustc-check-cfg=cfg(tokio_unstable)");
    println!("cargo::rerun-if-env-changed=PATH");
    let path = std::env::var_os("PATH").unwrap_or_default();
    if std::env::split_paths(&path).any(|dir| dir.join("redis-server").is_file()) {
        println!("cargo::rustc-cfg=have_redis_server");
    }
}

/// Compiles vendor/lua-5.1.5 into a static library, as the lua-src crate (mlua's
/// `vendored`) builds Lua 5.1: every .c file of the directory, LUA_USE_LINUX on Linux,
/// the BSDs and macOS (LUA_USE_POSIX elsewhere), Lua's API checks in debug builds.
fn lua() {
    const DIR: &str = "vendor/lua-5.1.5";
    println!("cargo::rerun-if-changed={DIR}");
    let target = std::env::var("TARGET").unwrap_or_default();
    let mut build = cc::Build::new();
    if target.contains("linux") || target.ends_with("bsd") || target.contains("apple-darwin") {
        build.define("LUA_USE_LINUX", None);
    } else {
        build.define("LUA_USE_POSIX", None);
    }
    if cfg!(debug_assertions) {
        build.define("LUA_USE_APICHECK", None).debug(true);
    }
    let mut files: Vec<_> = std::fs::read_dir(DIR)
        .unwrap_or_else(|e| panic!("cannot read {DIR}: {e}"))
        .map(|e| e.expect("a directory entry").path())
        .filter(|p| p.extension().is_some_and(|x| x == "c"))
        .collect();
    files.sort();
    build
        .include(DIR)
        .files(files)
        .warnings(false)
        .flag_if_supported("-fno-common")
        .compile("lua5.1");
}

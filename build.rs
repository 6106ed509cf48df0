//! Builds the server's one C file (src/commands/families/long_double.c: INCRBYFLOAT's long
//! double arithmetic, as Redis does it), and tells the test suite whether
//! `redis-server` is on PATH: tests that compare with a real Redis are marked
//! `#[cfg_attr(not(have_redis_server), ignore = ...)]`, so the summary says "ignored"
//! where it is missing instead of passing silently.

fn main() {
    println!("cargo::rerun-if-changed=src/commands/families/long_double.c");
    if std::env::var_os("CARGO_FEATURE_SERVER").is_some() {
        cc::Build::new()
            .file("src/commands/families/long_double.c")
            .compile("redlockd_long_double");
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

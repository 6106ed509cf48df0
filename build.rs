//! Tells the test suite whether `redis-server` is on PATH: tests that compare with a
//! real Redis are marked `#[cfg_attr(not(have_redis_server), ignore = ...)]`, so the
//! summary says "ignored" where it is missing instead of passing silently.

fn main() {
    println!("cargo::rustc-check-cfg=cfg(have_redis_server)");
    println!("cargo::rerun-if-env-changed=PATH");
    let path = std::env::var_os("PATH").unwrap_or_default();
    if std::env::split_paths(&path).any(|dir| dir.join("redis-server").is_file()) {
        println!("cargo::rustc-cfg=have_redis_server");
    }
}

//! The integration tests, one module per behaviour area, linked into one test binary:
//! one link of the crate instead of one per file (a clean `cargo test --no-run` went
//! from 6m46s to 1m07s on 2 busy cores, and target/ from ~3.7 GB to ~1.3 GB).
//! Tests that measure the process's own allocator (maxmemory, INFO memory, the
//! heavy hostile inputs) keep binaries of their own beside this one: in a shared
//! process other tests' allocations would move their numbers.

#[path = "../support/mod.rs"]
mod support;

mod acl;
mod aof;
mod bitmaps;
mod blocking_from_script;
mod blocking_zsets;
mod cas;
mod cli;
mod client_tracking;
mod cluster;
mod cluster_checker;
mod cluster_moves;
mod cluster_redis_rs;
mod command_keys;
mod config_settings;
mod connection;
mod differential;
mod differential_bits;
mod differential_streams;
mod differential_types;
mod expire;
mod fence;
mod fence_coverage;
mod fenced_writes;
mod fencing;
mod fencing_processes;
mod functions;
mod geo;
mod harness;
mod hashes;
mod hyperloglog;
mod keys;
mod keyspace_events;
mod list_moves;
mod lists;
mod lock_command;
mod lock_command_inprocess;
mod lock_delay;
mod locks;
mod lua_libs;
mod monitor;
mod multi;
mod mutual_exclusion;
mod protocol;
mod pubsub;
mod redis_lock_interop;
mod redisson_fair_semaphore;
mod redisson_lock;
mod redlock_client;
mod redlock_cluster_checker;
mod redlock_clusters;
mod redlock_inprocess;
mod rslock_interop;
mod scripting;
mod scripting_survival;
mod security;
mod shutdown;
mod sort_dump;
mod sorted_sets;
mod stream_dump;
mod streams;
mod strings;
mod testing_backend;
mod tls;

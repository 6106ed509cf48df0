//! What the Lua instruction hook does for a script that runs long (kept apart from the
//! hook itself, which also enforces SCRIPT KILL).

use super::engine::RunSlot;

/// Called by the hook every `HOOK_EVERY` instructions while a script runs. Once the
/// script passes `--busy-script-time`, clients waiting for the keyspace gate are woken
/// so they answer BUSY at once.
pub(super) fn tick(slot: &RunSlot) {
    if slot.running.check_slow() {
        // SAFETY: see `RunSlot::ctx`: the hook runs inside the run that set the
        // pointer, on its thread; only the shared server state is read.
        let shared = unsafe { (*slot.ctx).shared };
        crate::commands::atomic::script_turned_busy(shared);
    }
}

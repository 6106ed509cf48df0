//! `redlockd slots move --slots 0-100 --to HOST:PORT`: the operator's one command for
//! a slot move, in the safe order (docs/cluster.md). It reads the cluster's map from
//! a node, then for each node that loses slots, sends that node the next map version
//! (CLUSTER SETMAP): the node moves the slots' keys to the new owner, installs the
//! map, drops the keys and pushes the map to the new owner (`cluster::migrate`).
//! Last, every other node of the map gets the final map.

use redlockd::cluster_operator::{move_slots, MoveRequest};

#[derive(clap::Subcommand, Debug, Clone)]
pub enum SlotsCommand {
    /// Move hash slots, with their keys, to a node (added to the map if it is not in
    /// it yet), in the safe order: docs/cluster.md.
    Move(MoveArgs),
}

#[derive(clap::Args, Debug, Clone)]
pub struct MoveArgs {
    /// The slots: ranges and single slots, comma-separated (0-100,200).
    #[arg(long)]
    slots: String,
    /// The node that gets them (HOST:PORT, as clients reach it).
    #[arg(long)]
    to: String,
    /// A node to read the current map from [default: --to].
    #[arg(long)]
    seed: Option<String>,
    /// USER:PASSWORD sent (AUTH) to every node.
    #[arg(long, env = "REDLOCKD_CLUSTER_AUTH")]
    auth: Option<String>,
}

/// Runs an operator action.
pub fn run(cmd: SlotsCommand) -> Result<(), String> {
    let SlotsCommand::Move(args) = cmd;
    move_slots(&MoveRequest {
        slots: args.slots,
        to: args.to,
        seed: args.seed,
        auth: args.auth,
    })
}

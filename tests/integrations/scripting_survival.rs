//! Lua cannot take the server down (issue 40): a script at the memory limit, a flushed
//! or rebuilt VM, a killed script, an error raised from a Rust callback each end in an
//! error reply, and the server keeps serving. Run against a `redlockd` process, so a
//! regression shows as the process's exit status instead of ending this test binary.

use super::support::process::Node;
use super::support::raw::Raw;
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use std::time::{Duration, Instant};

/// Bound on one step that runs a script to the memory limit (a debug build on two
/// busy cores: ~1 s each when idle).
const SCRIPT_BOUND: Duration = Duration::from_secs(60);

/// Bound on a PING or an ordinary command.
const PING_BOUND: Duration = Duration::from_secs(10);

const KILLED: &str = "-ERR Script killed by user with SCRIPT KILL...";

/// A script that fills the VM to exactly its 256 MB limit (the collector stopped,
/// `collectgarbage('count')` read before each allocation, the last string sized to
/// what is left), then runs `ending`. `reply` = {bytes left, room before the last
/// string} is made before memory runs out.
fn fill_then(ending: &str) -> String {
    let slots = vec!["0"; 2048].join(",");
    format!(
        "local cg, rep, sub = collectgarbage, string.rep, string.sub
         cg('stop')
         local limit = 256 * 1024 * 1024
         local reply = {{0, 0}}
         local function used() return cg('count') * 1024 end
         local big = rep('x', 65536)
         local keep = {{}}
         local n = 0
         while limit - used() > 1048576 do n = n + 1; keep[n] = big .. n end
         local small = sub(big, 1, 1024)
         local smalls = {{{slots}}}
         local m = 0
         while limit - used() > 4096 do m = m + 1; smalls[m] = small .. m end
         local room = limit - used()
         pcall(rep, 'y', room - 25)
         reply[1] = limit - used()
         reply[2] = room
         {ending}"
    )
}

/// A node process and a connection that only PINGs (the "second client").
struct Survivor {
    node: Node,
    probe: Raw,
}

impl Survivor {
    async fn start() -> Survivor {
        let node = Node::spawn(&["--restart-delay", "0", "--max-ttl", "1h", "--log", "warn"]);
        let probe = Raw::connect(node.addr()).await;
        Survivor { node, probe }
    }

    async fn connect(&self) -> Raw {
        Raw::connect(self.node.addr()).await
    }

    /// `args` on `conn`, within `bound`; a server that stopped answering fails the
    /// test with its exit status.
    async fn ask(&mut self, conn: &mut Raw, bound: Duration, args: &[&str], step: &str) -> String {
        match conn.try_cmd(bound, args).await {
            Some(reply) => reply,
            None => self.died(step),
        }
    }

    fn died(&mut self, step: &str) -> ! {
        let status = self.node.wait_exit();
        panic!("the server stopped answering at {step}: exited with {status}");
    }

    /// The second client still gets PONG.
    async fn still_serves(&mut self, step: &str) {
        let mut probe = std::mem::replace(&mut self.probe, self.connect().await);
        let reply = self.ask(&mut probe, PING_BOUND, &["PING"], step).await;
        assert_eq!(reply, "+PONG\r\n", "{step}");
        self.probe = probe;
    }
}

/// The repro of issue 40, reduced to its cause: a VM made new by SCRIPT FLUSH and a
/// script that leaves it at its memory limit and then returns a table or raises. The
/// old code stored the result outside any protected call, in a table that had to grow:
/// Lua raised "not enough memory" there and called exit(1).
#[tokio::test(flavor = "multi_thread")]
async fn a_script_at_the_memory_limit_of_a_flushed_vm_gets_an_error_and_the_server_runs_on() {
    let mut s = Survivor::start().await;
    let mut c = s.connect().await;
    // Full to the byte, then a table reply: the reply is the table.
    let flush = s.ask(&mut c, PING_BOUND, &["SCRIPT", "FLUSH"], "flush").await;
    assert_eq!(flush, "+OK\r\n");
    let script = fill_then("return reply");
    let reply = s.ask(&mut c, SCRIPT_BOUND, &["EVAL", &script, "0"], "full, table").await;
    assert!(reply.starts_with("*2\r\n:0\r\n:"), "the VM is full to the byte: {reply}");
    s.still_serves("after a table returned at the limit").await;
    // Full, then an error: the message handler cannot run.
    s.ask(&mut c, PING_BOUND, &["SCRIPT", "FLUSH", "ASYNC"], "flush").await;
    let script = fill_then("error('full')");
    let reply = s.ask(&mut c, SCRIPT_BOUND, &["EVAL", &script, "0"], "full, error").await;
    let sha = sha1_smol::Sha1::from(script.as_bytes()).digest().to_string();
    assert_eq!(
        reply,
        format!("-ERR Error running script {sha}, not enough memory\r\n")
    );
    s.still_serves("after an error raised at the limit").await;
    // The repro's own sequence: 1e7 tables after a flush, while the probe PINGs.
    s.ask(&mut c, PING_BOUND, &["SCRIPT", "FLUSH"], "flush").await;
    let one = s.ask(&mut c, PING_BOUND, &["EVAL", "return 1", "0"], "return 1").await;
    assert_eq!(one, ":1\r\n");
    let bomb = "local t = {} for i = 1, 1e7 do t[i] = {} end return #t";
    c.send_cmd(&["EVAL", bomb, "0"]).await;
    s.still_serves("while the memory bomb runs").await;
    let reply = match tokio::time::timeout(SCRIPT_BOUND, c.reply()).await {
        Ok(r) => r,
        Err(_) => s.died("the memory bomb"),
    };
    assert!(reply.contains("not enough memory"), "{reply}");
    s.still_serves("after the memory bomb").await;
    let one = s.ask(&mut c, PING_BOUND, &["EVAL", "return 1", "0"], "after").await;
    assert_eq!(one, ":1\r\n");
}

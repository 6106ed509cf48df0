//! `redlockd lock`'s flags: clap's half of the lock runner, turned into the library's
//! [`LockCommand`] (`redlockd::redlock::flock`), which runs it.

use redlockd::config::parse_duration;
use redlockd::redlock::flock::LockCommand;
use std::ffi::OsString;
use std::time::Duration;

/// The flags of `redlockd lock` (see [`LockCommand`] for what it does and its exit codes).
#[derive(clap::Args, Debug, Clone)]
pub struct LockArgs {
    /// Nodes, as a comma-separated list of host:port, or rediss://host:port for TLS (an
    /// odd number, 3 or 5, is usual). A URL may carry credentials:
    /// redis://user:password@host:port (they win over --user / --password).
    #[arg(long, env = "REDLOCKD_NODES", value_delimiter = ',', required = true)]
    pub nodes: Vec<String>,
    /// CA certificates (PEM) that sign the rediss:// nodes' certificates [default: the
    /// system's trust store].
    #[arg(long, env = "REDLOCKD_TLS_CA_CERT_FILE")]
    pub tls_ca_cert_file: Option<std::path::PathBuf>,
    /// Client certificate (PEM) for nodes that require one (tls-auth-clients yes).
    #[arg(long, env = "REDLOCKD_TLS_CLIENT_CERT_FILE", requires = "tls_key_file")]
    pub tls_cert_file: Option<std::path::PathBuf>,
    /// The client certificate's private key (PEM).
    #[arg(long, env = "REDLOCKD_TLS_CLIENT_KEY_FILE", requires = "tls_cert_file")]
    pub tls_key_file: Option<std::path::PathBuf>,
    /// Lock TTL: how long the lock outlives a holder that dies without releasing it.
    /// The watchdog extends it every ttl/3. Milliseconds, or with ms/s/m/h.
    #[arg(long, default_value = "10s", value_parser = parse_duration)]
    pub ttl: Duration,
    /// How long to keep retrying while the lock is held elsewhere. The default, 0, makes
    /// one attempt and gives up at once (cron: skip this run if another is running).
    #[arg(long, default_value = "0", value_parser = parse_duration)]
    pub wait: Duration,
    /// Time between SIGTERM and SIGKILL when the lock is lost while the command runs.
    #[arg(long, default_value = "5s", value_parser = parse_duration)]
    pub grace: Duration,
    /// Per-node timeout of each request (default: the smaller of 50 ms and ttl/10).
    #[arg(long, value_parser = parse_duration)]
    pub node_timeout: Option<Duration>,
    /// Password sent with AUTH to every node (prefer the environment variable: a flag is
    /// visible in ps).
    #[arg(long, env = "REDLOCKD_PASSWORD", hide_env_values = true)]
    pub password: Option<String>,
    /// ACL user to AUTH as on every node (with --password); default: the default user.
    #[arg(long, env = "REDLOCKD_USER")]
    pub user: Option<String>,
    /// Acquire with a fencing token (redlockd nodes only: FENCING.GRANT and
    /// FENCING.COMMIT) and pass it to the command as REDLOCKD_FENCING_TOKEN, to send with
    /// every write to the resource the lock protects.
    #[arg(long)]
    pub fencing_token: bool,
    /// Say on stderr when the lock is acquired, with its fencing token.
    #[arg(short, long)]
    pub verbose: bool,
    /// The lock's name (the key on every node).
    pub name: String,
    /// The command to run, and its arguments (after `--`).
    #[arg(
        required = true,
        trailing_var_arg = true,
        allow_hyphen_values = true,
        num_args = 1..
    )]
    pub command: Vec<OsString>,
}

impl From<LockArgs> for LockCommand {
    fn from(a: LockArgs) -> LockCommand {
        LockCommand {
            nodes: a.nodes,
            tls_ca_cert_file: a.tls_ca_cert_file,
            tls_cert_file: a.tls_cert_file,
            tls_key_file: a.tls_key_file,
            ttl: a.ttl,
            wait: a.wait,
            grace: a.grace,
            node_timeout: a.node_timeout,
            password: a.password,
            user: a.user,
            fencing_token: a.fencing_token,
            verbose: a.verbose,
            name: a.name,
            command: a.command,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser, Debug)]
    struct Cli {
        #[command(flatten)]
        lock: LockArgs,
    }

    #[test]
    fn command_after_double_dash_keeps_its_flags() {
        let cli = Cli::try_parse_from([
            "lock",
            "--nodes",
            "a:1,b:2,c:3",
            "--ttl",
            "2s",
            "job",
            "--",
            "sh",
            "-c",
            "exit 7",
        ])
        .expect("parses");
        assert_eq!(cli.lock.nodes, ["a:1", "b:2", "c:3"]);
        assert_eq!(cli.lock.ttl, Duration::from_secs(2));
        assert_eq!(cli.lock.wait, Duration::ZERO);
        assert_eq!(cli.lock.name, "job");
        assert_eq!(cli.lock.command, ["sh", "-c", "exit 7"]);
    }

    #[test]
    fn a_command_is_required() {
        assert!(Cli::try_parse_from(["lock", "--nodes", "a:1", "job"]).is_err());
    }
}

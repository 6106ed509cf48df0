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
    /// odd number, 3 or 5, is usual) [env: REDLOCKD_NODES]. A URL may carry credentials:
    /// redis://user:password@host:port (they win over --user / --password); on the
    /// command line they are visible in ps, so prefer the environment variable.
    #[arg(long, value_delimiter = ',')]
    pub nodes: Vec<String>,
    /// A Redis Cluster (redlockd's cluster mode, or Redis's) as one node: its seed
    /// addresses, comma-separated. Repeat it for each cluster (Redlock over 3 clusters:
    /// three --cluster flags); it may be mixed with --nodes. The client learns the
    /// cluster's slot map and sends the lock's key to the node serving its slot.
    #[arg(long = "cluster", value_name = "SEEDS")]
    pub clusters: Vec<String>,
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
    /// The watchdog extends it every ttl/3. With a unit (ms/s/m/h), or milliseconds;
    /// a bare number below 1000 is refused (`--ttl 30` would be 30 ms: write 30s).
    #[arg(long, default_value = "10s", value_parser = parse_ttl)]
    pub ttl: Duration,
    /// How long to keep retrying while the lock is held elsewhere. The default, 0, makes
    /// one attempt and gives up at once (cron: skip this run if another is running).
    #[arg(long, default_value = "0", value_parser = parse_duration)]
    pub wait: Duration,
    /// Longest time between SIGTERM and SIGKILL to the command's process group when the
    /// lock is lost while it runs; never longer than the lock's validity left.
    #[arg(long, default_value = "5s", value_parser = parse_duration)]
    pub grace: Duration,
    /// Per-node timeout of each request (default: the smaller of 50 ms and ttl/10).
    #[arg(long, value_parser = parse_duration)]
    pub node_timeout: Option<Duration>,
    /// Password sent with AUTH to every node [env: REDLOCKD_PASSWORD]. On the command
    /// line it is visible in ps: prefer the environment variable or --password-file.
    #[arg(long, conflicts_with = "password_file")]
    pub password: Option<String>,
    /// Read the password from this file's first line (`-`: the first line of stdin;
    /// the command gets the rest of stdin).
    #[arg(long, value_name = "PATH")]
    pub password_file: Option<std::path::PathBuf>,
    /// ACL user to AUTH as on every node (with --password); default: the default user.
    #[arg(long, env = "REDLOCKD_USER")]
    pub user: Option<String>,
    /// Let the command inherit REDLOCKD_PASSWORD and REDLOCKD_NODES (by default they are
    /// removed from its environment: they are this command's credentials, not its own).
    #[arg(long)]
    pub inherit_credentials: bool,
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

/// `--ttl`: a duration, but a bare number below 1000 (milliseconds) is refused: `--ttl
/// 30` from someone who meant seconds would be a 30 ms lock, lost at the first hiccup (or
/// never renewed in time), stopping the job; with a unit nothing is ambiguous.
fn parse_ttl(s: &str) -> Result<Duration, String> {
    let d = parse_duration(s).map_err(|e| e.to_string())?;
    let bare = !s.trim().is_empty() && s.trim().bytes().all(|b| b.is_ascii_digit());
    if bare && d < Duration::from_secs(1) {
        return Err(format!(
            "a bare number is milliseconds: {s} would be {} ms; write {s}s for seconds, or \
             {s}ms if milliseconds are meant",
            d.as_millis()
        ));
    }
    Ok(d)
}

/// Whether a node address carries a password (`redis://user:password@host:port`).
fn has_password(node: &str) -> bool {
    node.split_once("://")
        .and_then(|(_, rest)| rest.rsplit_once('@'))
        .is_some_and(|(credentials, _)| credentials.contains(':'))
}

/// The environment variable `var` when set and not empty.
fn env_var(var: &str) -> Option<String> {
    std::env::var(var).ok().filter(|v| !v.is_empty())
}

impl From<LockArgs> for LockCommand {
    /// Flags win over REDLOCKD_NODES and REDLOCKD_PASSWORD; a password given on the
    /// command line (a flag or in a node URL) is warned about, as redis-cli warns about
    /// `-a`: any user of the machine can read it in ps for the whole run.
    fn from(a: LockArgs) -> LockCommand {
        let mut nodes: Vec<String> = if a.nodes.is_empty() {
            env_var("REDLOCKD_NODES")
                .map(|v| {
                    v.split(',')
                        .map(str::trim)
                        .filter(|n| !n.is_empty())
                        .map(str::to_string)
                        .collect()
                })
                .unwrap_or_default()
        } else {
            if a.nodes.iter().any(|n| has_password(n)) {
                eprintln!(
                    "redlockd lock: warning: a password in a --nodes URL is visible to \
                     other users (ps) while the command runs; use REDLOCKD_NODES, or \
                     REDLOCKD_PASSWORD / --password-file"
                );
            }
            a.nodes
        };
        if a.clusters
            .iter()
            .flat_map(|c| c.split(','))
            .any(has_password)
        {
            eprintln!(
                "redlockd lock: warning: a password in a --cluster URL is visible to other \
                 users (ps) while the command runs; use REDLOCKD_PASSWORD or --password-file"
            );
        }
        nodes.extend(a.clusters.iter().map(|seeds| format!("cluster:{seeds}")));
        let password = match a.password {
            Some(p) => {
                eprintln!(
                    "redlockd lock: warning: --password on the command line is visible to \
                     other users (ps) while the command runs; use REDLOCKD_PASSWORD or \
                     --password-file"
                );
                Some(p)
            }
            None if a.password_file.is_none() => env_var("REDLOCKD_PASSWORD"),
            None => None,
        };
        LockCommand {
            nodes,
            tls_ca_cert_file: a.tls_ca_cert_file,
            tls_cert_file: a.tls_cert_file,
            tls_key_file: a.tls_key_file,
            ttl: a.ttl,
            wait: a.wait,
            grace: a.grace,
            node_timeout: a.node_timeout,
            password,
            password_file: a.password_file,
            user: a.user,
            inherit_credentials: a.inherit_credentials,
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
    fn a_bare_ttl_below_a_second_is_refused_and_units_are_taken() {
        let ttl = |v: &str| {
            Cli::try_parse_from(["lock", "--ttl", v, "job", "--", "true"]).map(|c| c.lock.ttl)
        };
        let err = ttl("30").expect_err("30 ms was meant as seconds");
        assert_eq!(err.kind(), clap::error::ErrorKind::ValueValidation);
        assert!(err.to_string().contains("write 30s for seconds"), "{err}");
        assert!(ttl("999").is_err());
        assert_eq!(ttl("1000").unwrap(), Duration::from_secs(1));
        assert_eq!(ttl("30ms").unwrap(), Duration::from_millis(30));
        assert_eq!(ttl("30s").unwrap(), Duration::from_secs(30));
    }

    #[test]
    fn passwords_in_node_urls_are_seen() {
        assert!(has_password("redis://u:pw@h:1"));
        assert!(has_password("rediss://:pw@h:1"));
        assert!(!has_password("redis://u@h:1"));
        assert!(!has_password("h:1"));
        assert!(!has_password("redis://h:1"));
    }

    #[test]
    fn each_cluster_flag_is_one_node() {
        let cli = Cli::try_parse_from([
            "lock",
            "--cluster",
            "a:1,a:2",
            "--nodes",
            "n:1",
            "--cluster",
            "b:1",
            "job",
            "--",
            "true",
        ])
        .expect("parses");
        assert_eq!(cli.lock.clusters, ["a:1,a:2", "b:1"]);
        let cmd = LockCommand::from(cli.lock);
        assert_eq!(cmd.nodes, ["n:1", "cluster:a:1,a:2", "cluster:b:1"]);
    }

    #[test]
    fn a_command_is_required() {
        assert!(Cli::try_parse_from(["lock", "--nodes", "a:1", "job"]).is_err());
    }
}

//! Server configuration: defaults, validation, and the durations syntax the CLI accepts.

use crate::clock::Clock;
use std::net::IpAddr;
use std::time::Duration;

/// Default bound on every TTL. 30 s covers the common lock clients' defaults
/// (Redisson's 30 s watchdog lease, pottery's 10 s, node-redlock examples).
pub const DEFAULT_MAX_TTL: Duration = Duration::from_secs(30);

/// Added to max-ttl for the default restart delay: covers clock-rate drift between
/// nodes and the client's own timing slack.
pub const RESTART_MARGIN: Duration = Duration::from_secs(1);

#[derive(Clone, Debug)]
pub struct Config {
    pub bind: IpAddr,
    /// 0 picks a free port (see `ServerHandle::addr`).
    pub port: u16,
    /// Every TTL must be at most this.
    pub max_ttl: Duration,
    /// How long after boot writes are fenced; `None` means max_ttl + RESTART_MARGIN,
    /// zero disables the fence.
    pub restart_delay: Option<Duration>,
    /// Refuse writes that would leave a key without a TTL.
    pub require_ttl: bool,
    pub requirepass: Option<String>,
    pub maxclients: usize,
    pub databases: usize,
    pub proto_max_bulk_len: usize,
    /// Past this, other clients get BUSY while a script runs and SCRIPT KILL works.
    pub busy_script_time: Duration,
    /// The clock; `None` means the real one.
    pub clock: Option<Clock>,
    /// Enables DEBUG (clock controls, crash-restart, sleep).
    pub enable_debug_command: bool,
    /// Seeds the server's randomness (SCAN order, Lua math.random); random when `None`.
    pub seed: Option<u64>,
    /// A subscriber whose unsent output passes this many bytes is disconnected.
    pub pubsub_output_limit: usize,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            bind: IpAddr::from([127, 0, 0, 1]),
            port: 6379,
            max_ttl: DEFAULT_MAX_TTL,
            restart_delay: None,
            require_ttl: false,
            requirepass: None,
            maxclients: 10_000,
            databases: 16,
            proto_max_bulk_len: 512 * 1024 * 1024,
            busy_script_time: Duration::from_secs(5),
            clock: None,
            enable_debug_command: false,
            seed: None,
            pubsub_output_limit: 32 * 1024 * 1024,
        }
    }
}

impl Config {
    /// A config for tests: port 0, a manual clock, no fence, DEBUG enabled.
    pub fn for_tests() -> Config {
        Config {
            port: 0,
            restart_delay: Some(Duration::ZERO),
            clock: Some(Clock::manual()),
            enable_debug_command: true,
            seed: Some(1),
            ..Config::default()
        }
    }

    /// The restart delay in effect.
    pub fn effective_restart_delay(&self) -> Duration {
        self.restart_delay
            .unwrap_or(self.max_ttl + RESTART_MARGIN)
    }

    /// Checks the settings that can be wrong.
    pub fn validate(&self) -> Result<(), String> {
        if self.max_ttl.is_zero() {
            return Err("max-ttl must be positive".into());
        }
        if let Some(d) = self.restart_delay {
            if !d.is_zero() && d < self.max_ttl {
                return Err(format!(
                    "restart-delay ({} ms) is shorter than max-ttl ({} ms): a restarted node could grant a lock another node still holds; use at least max-ttl, or 0 to disable the fence",
                    d.as_millis(),
                    self.max_ttl.as_millis()
                ));
            }
        }
        if self.databases == 0 {
            return Err("databases must be at least 1".into());
        }
        if self.maxclients == 0 {
            return Err("maxclients must be at least 1".into());
        }
        Ok(())
    }
}

/// Parses `1500` (milliseconds), `1500ms`, `30s`, `2m`, `1h`.
pub fn parse_duration(text: &str) -> Result<Duration, String> {
    let t = text.trim();
    let split = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let n: u64 = num
        .parse()
        .map_err(|_| format!("invalid duration '{text}': expected e.g. 1500, 1500ms, 30s, 2m"))?;
    let ms = match unit {
        "" | "ms" => Some(n),
        "s" => n.checked_mul(1000),
        "m" => n.checked_mul(60_000),
        "h" => n.checked_mul(3_600_000),
        _ => return Err(format!("invalid duration unit in '{text}': use ms, s, m or h")),
    };
    ms.map(Duration::from_millis)
        .ok_or_else(|| format!("duration '{text}' is too large"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_accept_plain_ms_and_suffixes() {
        assert_eq!(parse_duration("1500").unwrap(), Duration::from_millis(1500));
        assert_eq!(parse_duration("1500ms").unwrap(), Duration::from_millis(1500));
        assert_eq!(parse_duration("30s").unwrap(), Duration::from_secs(30));
        assert_eq!(parse_duration("2m").unwrap(), Duration::from_secs(120));
        assert!(parse_duration("x").is_err());
        assert!(parse_duration("5d").is_err());
    }

    #[test]
    fn restart_delay_shorter_than_max_ttl_is_refused() {
        let c = Config {
            max_ttl: Duration::from_secs(10),
            restart_delay: Some(Duration::from_secs(5)),
            ..Config::default()
        };
        assert!(c.validate().is_err());
    }
}

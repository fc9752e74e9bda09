//! An SSH address as written in the configuration (`ssh = "user@host:port"` of a
//! node): parsed and checked when the configuration is read, used by `transport::ssh`
//! to connect.

use std::fmt;

/// A parsed `user@host[:port]` address. IPv6 hosts are written in brackets
/// (`root@[::1]:2222`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SshAddr {
    /// Login name; `None` means the controller's own user name.
    pub user: Option<String>,
    pub host: String,
    pub port: u16,
}

impl SshAddr {
    /// Parses `[user@]host[:port]`.
    ///
    /// Errors: an empty host or user, a bad port, an unclosed `[`.
    pub fn parse(s: &str) -> Result<SshAddr, String> {
        let bad = |why: &str| format!("bad ssh address '{s}': {why}");
        let (user, rest) = match s.rsplit_once('@') {
            Some(("", _)) => return Err(bad("empty user name")),
            Some((u, r)) => (Some(u.to_string()), r),
            None => (None, s),
        };
        let (host, port) = if let Some(v6) = rest.strip_prefix('[') {
            let (h, after) = v6.split_once(']').ok_or_else(|| bad("missing ']'"))?;
            let port = match after {
                "" => None,
                p => Some(p.strip_prefix(':').ok_or_else(|| bad("junk after ']'"))?),
            };
            (h, port)
        } else {
            match rest.split_once(':') {
                Some((h, p)) => (h, Some(p)),
                None => (rest, None),
            }
        };
        if host.is_empty() || host.contains(char::is_whitespace) {
            return Err(bad("empty or invalid host"));
        }
        let port = match port {
            None => 22,
            Some(p) => p
                .parse::<u16>()
                .ok()
                .filter(|p| *p != 0)
                .ok_or_else(|| bad("port must be 1-65535"))?,
        };
        Ok(SshAddr {
            user,
            host: host.to_string(),
            port,
        })
    }

    /// The name known_hosts files use for this host: `host`, or `[host]:port` when the
    /// port is not 22.
    pub fn known_hosts_name(&self) -> String {
        if self.port == 22 {
            self.host.clone()
        } else {
            format!("[{}]:{}", self.host, self.port)
        }
    }

    /// The login name: the given one, else the controller's user.
    pub fn user_or_current(&self) -> String {
        self.user.clone().unwrap_or_else(|| {
            nix::unistd::User::from_uid(nix::unistd::geteuid())
                .ok()
                .flatten()
                .map(|u| u.name)
                .unwrap_or_else(|| "root".into())
        })
    }
}

impl fmt::Display for SshAddr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if let Some(u) = &self.user {
            write!(f, "{u}@")?;
        }
        if self.host.contains(':') {
            write!(f, "[{}]:{}", self.host, self.port)
        } else {
            write!(f, "{}:{}", self.host, self.port)
        }
    }
}

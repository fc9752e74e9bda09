//! Bounds on what front-end connections can make the controller hold: connections per
//! user and in all, the size of one request, the bytes of requests still arriving (per
//! user and in all), and how long a request may take to arrive once begun. A peer past
//! a bound is disconnected and the controller's log says who and why, so that no local
//! user can exhaust the controller's memory or file descriptors.
//!
//! Slurm bounds the same things differently (slurmctld's `max_rpc_cnt` defers work,
//! and its message size is capped); sluice's figures are fixed here.

use crate::proto::codec::{Budget, Limits};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// The largest request a front-end may send, in bytes (a job script plus its
/// environment is far smaller; Slurm's default `max_script_size` is 4 MB).
pub const MAX_CLIENT_FRAME: usize = 64 << 20;
/// Bytes of requests still arriving that one user's connections may hold together.
pub const USER_PENDING_BYTES: usize = 256 << 20;
/// Bytes of requests still arriving that all connections may hold together.
pub const TOTAL_PENDING_BYTES: usize = 1 << 30;
/// Connections one user may hold open at once (root and the controller's owner are
/// bounded by the total only).
pub const USER_CONNECTIONS: usize = 512;
/// Once a request's first byte has arrived, its rest must follow within this time.
pub const FRAME_DEADLINE: Duration = Duration::from_secs(30);

/// The controller's connection bounds and what is in use of them.
#[derive(Debug)]
pub struct ConnLimits {
    per_user: usize,
    total: usize,
    /// Users exempt from `per_user` (root and the controller's owner).
    trusted: [u32; 2],
    open: Mutex<Open>,
    user_bytes: Mutex<HashMap<u32, Arc<Budget>>>,
    /// The size of each user's pool, in bytes.
    user_pool: usize,
    all_bytes: Arc<Budget>,
}

#[derive(Debug, Default)]
struct Open {
    total: usize,
    by_uid: HashMap<u32, usize>,
}

/// Why a connection was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Refused {
    #[error("uid {uid} already has {limit} connections open")]
    User { uid: u32, limit: usize },
    #[error("{limit} connections are already open")]
    Total { limit: usize },
}

/// One admitted connection; dropping it frees its place.
#[derive(Debug)]
pub struct ConnGuard {
    limits: Arc<ConnLimits>,
    uid: u32,
}

impl Drop for ConnGuard {
    fn drop(&mut self) {
        let mut open = self.limits.open.lock().unwrap_or_else(|p| p.into_inner());
        open.total = open.total.saturating_sub(1);
        if let Some(n) = open.by_uid.get_mut(&self.uid) {
            *n = n.saturating_sub(1);
            if *n == 0 {
                open.by_uid.remove(&self.uid);
            }
        }
    }
}

impl ConnLimits {
    /// Bounds of `per_user` connections per user and `total` in all, with pending-request
    /// pools of `user_bytes` per user and `all_bytes` in all; `owner` (the controller's
    /// uid) and root are bounded by `total` only.
    pub fn new(
        per_user: usize,
        total: usize,
        user_bytes: usize,
        all_bytes: usize,
        owner: u32,
    ) -> ConnLimits {
        ConnLimits {
            per_user,
            total,
            trusted: [0, owner],
            open: Mutex::new(Open::default()),
            user_bytes: Mutex::new(HashMap::new()),
            user_pool: user_bytes,
            all_bytes: Arc::new(Budget::new(all_bytes)),
        }
    }

    /// The bounds the controller runs with: [`USER_CONNECTIONS`] per user, `total` in
    /// all (from the process's file descriptor limit), and the pools above.
    pub fn standard(total: usize, owner: u32) -> ConnLimits {
        ConnLimits::new(
            USER_CONNECTIONS,
            total,
            USER_PENDING_BYTES,
            TOTAL_PENDING_BYTES,
            owner,
        )
    }

    /// Admits a connection from `uid`, or says which bound it would break.
    pub fn admit(self: &Arc<Self>, uid: u32) -> Result<ConnGuard, Refused> {
        let mut open = self.open.lock().unwrap_or_else(|p| p.into_inner());
        if open.total >= self.total {
            return Err(Refused::Total { limit: self.total });
        }
        let mine = open.by_uid.get(&uid).copied().unwrap_or(0);
        if !self.trusted.contains(&uid) && mine >= self.per_user {
            return Err(Refused::User {
                uid,
                limit: self.per_user,
            });
        }
        open.total += 1;
        *open.by_uid.entry(uid).or_insert(0) += 1;
        Ok(ConnGuard {
            limits: self.clone(),
            uid,
        })
    }

    /// The framing limits of a connection from `uid`: [`MAX_CLIENT_FRAME`], the user's
    /// and the controller's pending-byte pools, and [`FRAME_DEADLINE`].
    pub fn frame_limits(&self, uid: u32) -> Limits {
        let user = self
            .user_bytes
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .entry(uid)
            .or_insert_with(|| Arc::new(Budget::new(self.user_pool)))
            .clone();
        Limits {
            max_frame: MAX_CLIENT_FRAME,
            budgets: vec![user, self.all_bytes.clone()],
            frame_deadline: Some(FRAME_DEADLINE),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn users_are_bounded_apart_and_trusted_users_by_the_total_only() {
        let l = Arc::new(ConnLimits::new(2, 5, 100, 1000, 1000));
        let a1 = l.admit(2000).unwrap();
        let _a2 = l.admit(2000).unwrap();
        assert_eq!(
            l.admit(2000).unwrap_err(),
            Refused::User {
                uid: 2000,
                limit: 2
            }
        );
        // Another user is not held back by the first.
        let _b = l.admit(3000).unwrap();
        // The owner (1000) and root pass the per-user bound but not the total.
        let _o1 = l.admit(1000).unwrap();
        let _o2 = l.admit(0).unwrap();
        assert_eq!(l.admit(1000).unwrap_err(), Refused::Total { limit: 5 });
        // A closed connection frees its place.
        drop(a1);
        let _a3 = l.admit(2000).unwrap();
    }

    #[test]
    fn frame_limits_share_one_pool_per_user() {
        let l = ConnLimits::new(10, 10, 100, 150, 0);
        let a = l.frame_limits(7);
        let b = l.frame_limits(7);
        let c = l.frame_limits(8);
        assert!(a.budgets[0].try_take(80));
        // The same user's second connection draws on the same pool…
        assert!(!b.budgets[0].try_take(30));
        // …another user's on its own, and all share the total.
        assert!(c.budgets[0].try_take(60));
        assert!(!c.budgets[1].try_take(151));
        assert_eq!(a.max_frame, MAX_CLIENT_FRAME);
        assert_eq!(a.frame_deadline, Some(FRAME_DEADLINE));
    }
}

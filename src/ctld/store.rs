//! Persistence: one SQLite database (WAL) holding every job record, live and finished,
//! for crash recovery and accounting (DESIGN.md §4; cf. slurmctld state save +
//! slurmdbd's job table).
//!
//! The store runs on its own thread and is the only writer. Mutations arrive in order;
//! everything queued is written in one transaction (group commit), and only after the
//! commit are the replies that waited on it released — so a job id a client sees is
//! durable. Queries run after the writes queued before them, so they see them.
//!
//! Durability: a batch that releases a reply (an acknowledged submission, cancel,
//! update…) commits with `synchronous=FULL`, so its WAL frames, and every frame before
//! them, are fsynced before the client hears anything. A batch nobody waits for (job
//! start and end transitions, usage, reservations, node down intervals) commits with
//! `synchronous=NORMAL`: written to the WAL, not fsynced. A controller killed outright
//! loses none of it (the WAL is in the OS's page cache); only a machine crash can lose
//! such a tail, which the controller's reconciliation with the agents on restart
//! repairs (DESIGN.md §4). The next acknowledged batch, or a checkpoint, fsyncs it.

use crate::model::Job;
use crate::model::assoc::{Account, AssocTree, Cluster as AcctCluster, Qos, User, UserAssoc};
use crate::model::reservation::Reservation;
use crate::proto::codec::{decode, encode};
use crate::proto::{AcctQuery, Response};
use crate::sched::fairshare::UsageLedger;
use crate::sched::limits::UsedMins;
use rusqlite::{Connection, OpenFlags, params};
use std::path::Path;
use tokio::sync::{mpsc, oneshot};

/// SQLite `application_id` marking a sluice database ("SLUC").
const APP_ID: i64 = 0x534c_5543;
/// Schema version stored in `user_version` (2 added `jobs.array_job_id`: the array
/// or heterogeneous job a record belongs to, so that its id finds all of them; 3 added
/// the accounting tables `acct_*`: clusters, accounts, users, associations, QOS and
/// TRES-minute usage. Older databases get the new tables empty, which loads as the
/// initial tree).
const SCHEMA: i64 = 3;

/// Errors opening the database.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("cannot open database {path}: {source}")]
    Open {
        path: String,
        source: rusqlite::Error,
    },
    #[error(
        "{path} is not a sluice database (application id {found:#x}); refusing to touch it. Move it away or point state_dir elsewhere."
    )]
    Foreign { path: String, found: i64 },
    #[error(
        "{path} was written by a newer sluice (schema {found}, this build knows {SCHEMA}); refusing to touch it"
    )]
    TooNew { path: String, found: i64 },
    #[error(
        "{path} is corrupt or not a database: {msg}. Refusing to replace it; move it away to start afresh."
    )]
    Corrupt { path: String, msg: String },
    #[error("database error: {0}")]
    Sql(#[from] rusqlite::Error),
    #[error("undecodable job record {id}: {msg}")]
    Record { id: i64, msg: String },
    #[error("bad accounting data in the database: {0}")]
    Acct(String),
}

/// The id that names a job's whole group in the `array_job_id` column: its array's
/// id, its heterogeneous job's leader, or 0.
fn group_id(j: &Job) -> u32 {
    if j.array_job_id != 0 {
        j.array_job_id
    } else {
        j.het.map(|h| h.job_id).unwrap_or(0)
    }
}

/// Encodes an accounting record for its `data` column.
fn enc<T: serde::Serialize>(v: &T) -> Result<Vec<u8>, StoreError> {
    encode(v).map_err(|e| StoreError::Acct(e.to_string()))
}

/// One unit of work for the store thread.
pub enum StoreOp {
    /// Insert or replace a job record.
    Put(Box<Job>),
    /// Send `response` once everything queued before it is committed.
    Reply(oneshot::Sender<Response>, Response),
    /// Answer an accounting query.
    Query(AcctQuery, oneshot::Sender<Response>, i64),
    /// Replace the stored association tree (sacctmgr changes).
    PutAssoc(Box<AssocTree>),
    /// Replace the live reservations with this set.
    Resvs(Vec<Reservation>),
    /// Record a reservation window that was used (ended, rolled forward or deleted),
    /// for sreport.
    ResvHistory(Reservation),
    /// Record a node down interval (node, start, end) for sreport.
    NodeDown(String, i64, i64),
    /// Answer an sreport query: `[start, end)`, with the usage report's other parts
    /// filled in by the controller.
    Usage(
        i64,
        i64,
        Box<crate::proto::UsageReport>,
        oneshot::Sender<Response>,
    ),
    /// Replace the saved fair-share usage.
    PutFsUsage(Box<UsageLedger>),
    /// Messages for node agents, sent in order once everything queued before them is
    /// committed: a job is never launched, signalled or ended on a node before the
    /// record that says so is saved, so a controller killed at any instant restarts
    /// knowing every job that may be running (issue #25: a job started before its
    /// record was durable could run twice, or under a reused id).
    Forward(
        Vec<(
            mpsc::UnboundedSender<crate::proto::ToAgent>,
            crate::proto::ToAgent,
        )>,
    ),
}

/// The actor's side of the store channel: ops are collected and sent as one batch per
/// [`Outbox::flush`], so that a job's record and the reply that promises it is saved
/// reach the store thread together and share one transaction (and one fsync), instead
/// of the thread waking for the record alone and committing twice.
pub struct Outbox {
    tx: mpsc::UnboundedSender<Vec<StoreOp>>,
    pending: Vec<StoreOp>,
}

impl Outbox {
    /// An empty outbox sending to the store thread's channel.
    pub fn new(tx: mpsc::UnboundedSender<Vec<StoreOp>>) -> Outbox {
        Outbox {
            tx,
            pending: Vec::new(),
        }
    }

    /// Queues `op` for the next [`Outbox::flush`].
    pub fn send(&mut self, op: StoreOp) {
        self.pending.push(op);
    }

    /// Hands everything queued to the store thread (nothing when the queue is empty; a
    /// store thread that is gone drops the ops, and [`Outbox::is_closed`] says so).
    pub fn flush(&mut self) {
        if !self.pending.is_empty() {
            let _ = self.tx.send(std::mem::take(&mut self.pending));
        }
    }

    /// Whether the store thread has stopped.
    pub fn is_closed(&self) -> bool {
        self.tx.is_closed()
    }
}

/// Key of the fair-share usage ledger in the `kv` table.
const FS_USAGE_KEY: &str = "fairshare_usage";
/// kv key of the epoch second the cluster's database was created (decimal text).
const CREATED_KEY: &str = "cluster_created";

/// An open database.
pub struct Store {
    conn: Connection,
    /// Whether `PRAGMA synchronous` is FULL now (else NORMAL).
    sync_full: bool,
    /// Whether commits made with NORMAL may not be on disk yet.
    unsynced: bool,
}

/// The writes of one batch, run inside its transaction by [`Store::commit_batch`].
pub type BatchWrite<'a> = &'a mut dyn FnMut(&mut Store) -> Result<(), StoreError>;

/// How [`run`] commits one batch of operations.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Commit {
    /// Nothing to write and nothing to make durable.
    Nothing,
    /// Write with `synchronous=NORMAL`: nobody waits on this batch.
    Lazy,
    /// Write (or, with nothing to write, make earlier lazy commits durable) with
    /// `synchronous=FULL` before replies are released.
    Durable,
}

impl Commit {
    /// The commit a batch needs: `writes` (it changes the database), `acknowledges`
    /// (it releases a reply that promises the change is saved), `unsynced` (lazy commits
    /// since the last durable one).
    pub fn plan(writes: bool, acknowledges: bool, unsynced: bool) -> Commit {
        match (writes, acknowledges) {
            (_, true) if writes || unsynced => Commit::Durable,
            (true, false) => Commit::Lazy,
            _ => Commit::Nothing,
        }
    }
}

impl Store {
    /// Opens (creating if absent) the database at `path`, refusing files that are not
    /// sluice databases.
    pub fn open(path: &Path) -> Result<Store, StoreError> {
        let p = path.display().to_string();
        let existed = path.exists() && path.metadata().map(|m| m.len() > 0).unwrap_or(false);
        let conn = Connection::open_with_flags(
            path,
            OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_CREATE,
        )
        .map_err(|source| StoreError::Open {
            path: p.clone(),
            source,
        })?;
        let corrupt = |e: rusqlite::Error| StoreError::Corrupt {
            path: p.clone(),
            msg: e.to_string(),
        };
        let app: i64 = conn
            .query_row("PRAGMA application_id", [], |r| r.get(0))
            .map_err(corrupt)?;
        let ver: i64 = conn
            .query_row("PRAGMA user_version", [], |r| r.get(0))
            .map_err(corrupt)?;
        let tables: i64 = conn
            .query_row("SELECT count(*) FROM sqlite_master", [], |r| r.get(0))
            .map_err(corrupt)?;
        if app != APP_ID && (existed && tables > 0 || app != 0) {
            return Err(StoreError::Foreign {
                path: p,
                found: app,
            });
        }
        if ver > SCHEMA {
            return Err(StoreError::TooNew {
                path: p,
                found: ver,
            });
        }
        conn.pragma_update(None, "journal_mode", "WAL")
            .map_err(corrupt)?;
        conn.pragma_update(None, "synchronous", "FULL")?;
        // Another process holding the database briefly (a backup, sqlite3) is waited for.
        conn.busy_timeout(std::time::Duration::from_secs(10))?;
        if existed {
            let check: String = conn
                .query_row("PRAGMA quick_check", [], |r| r.get(0))
                .map_err(corrupt)?;
            if check != "ok" {
                return Err(StoreError::Corrupt {
                    path: p,
                    msg: format!("integrity check failed: {check}"),
                });
            }
        }
        conn.execute_batch(
            "CREATE TABLE IF NOT EXISTS jobs (
                id INTEGER PRIMARY KEY,
                uid INTEGER NOT NULL,
                submit INTEGER NOT NULL,
                start INTEGER,
                end INTEGER,
                active INTEGER NOT NULL,
                data BLOB NOT NULL,
                array_job_id INTEGER NOT NULL DEFAULT 0
             );
             CREATE INDEX IF NOT EXISTS jobs_end ON jobs(end);
             CREATE INDEX IF NOT EXISTS jobs_active ON jobs(active);",
        )?;
        // Schema 1 databases lack the array column; arrays did not exist then.
        let has_array: bool = conn
            .prepare("SELECT 1 FROM pragma_table_info('jobs') WHERE name = 'array_job_id'")?
            .exists([])?;
        if !has_array {
            conn.execute_batch(
                "ALTER TABLE jobs ADD COLUMN array_job_id INTEGER NOT NULL DEFAULT 0",
            )?;
        }
        conn.execute_batch(
            "CREATE INDEX IF NOT EXISTS jobs_array ON jobs(array_job_id) WHERE array_job_id != 0;
             CREATE TABLE IF NOT EXISTS resvs (name TEXT PRIMARY KEY, data BLOB NOT NULL);
             CREATE TABLE IF NOT EXISTS resv_history (
                id INTEGER PRIMARY KEY AUTOINCREMENT,
                start INTEGER NOT NULL,
                end INTEGER NOT NULL,
                data BLOB NOT NULL
             );
             CREATE TABLE IF NOT EXISTS node_down (
                node TEXT NOT NULL,
                start INTEGER NOT NULL,
                end INTEGER NOT NULL
             );",
        )?;
        conn.execute_batch(
            "CREATE TABLE IF NOT EXISTS acct_clusters (name TEXT PRIMARY KEY);
             CREATE TABLE IF NOT EXISTS acct_accounts (
                name TEXT PRIMARY KEY, parent TEXT, data BLOB NOT NULL);
             CREATE TABLE IF NOT EXISTS acct_users (
                name TEXT PRIMARY KEY, default_account TEXT NOT NULL, data BLOB NOT NULL);
             CREATE TABLE IF NOT EXISTS acct_assocs (
                seq INTEGER PRIMARY KEY, user TEXT NOT NULL, account TEXT NOT NULL,
                partition TEXT, data BLOB NOT NULL);
             CREATE TABLE IF NOT EXISTS acct_qos (name TEXT PRIMARY KEY, data BLOB NOT NULL);
             CREATE TABLE IF NOT EXISTS kv (key TEXT PRIMARY KEY, data BLOB NOT NULL);
             CREATE TABLE IF NOT EXISTS acct_usage (
                id INTEGER PRIMARY KEY CHECK (id = 0), at INTEGER NOT NULL, data BLOB NOT NULL);",
        )?;
        // When the cluster came to exist, for sreport: now for a new database; for one
        // made before this was recorded, its first job's submission.
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs() as i64);
        let first: Option<i64> =
            conn.query_row("SELECT min(submit) FROM jobs", [], |r| r.get(0))?;
        let created = first.map_or(now, |f| f.min(now));
        conn.execute(
            "INSERT OR IGNORE INTO kv (key, data) VALUES (?1, ?2)",
            params![CREATED_KEY, created.to_string().into_bytes()],
        )?;
        conn.pragma_update(None, "application_id", APP_ID)?;
        conn.pragma_update(None, "user_version", SCHEMA)?;
        Ok(Store {
            conn,
            sync_full: true,
            unsynced: false,
        })
    }

    /// Sets `PRAGMA synchronous` to FULL (`full`) or NORMAL, when it is not that already.
    fn set_sync(&mut self, full: bool) -> Result<(), StoreError> {
        if self.sync_full != full {
            let v = if full { "FULL" } else { "NORMAL" };
            self.conn.pragma_update(None, "synchronous", v)?;
            self.sync_full = full;
        }
        Ok(())
    }

    /// Runs `write` in one transaction committed as `how` says; with
    /// [`Commit::Durable`] and nothing to write (`write` is `None`), makes the earlier
    /// lazy commits durable. A failed write rolls the transaction back.
    ///
    /// Errors: the database refused a write or the commit.
    pub fn commit_batch(
        &mut self,
        how: Commit,
        write: Option<BatchWrite<'_>>,
    ) -> Result<(), StoreError> {
        let durable = match how {
            Commit::Nothing => return Ok(()),
            Commit::Lazy => false,
            Commit::Durable => true,
        };
        self.set_sync(durable)?;
        self.conn.execute_batch("BEGIN IMMEDIATE")?;
        let done = match write {
            Some(w) => w(self),
            // A one-page write (the schema version, unchanged) whose FULL commit
            // fsyncs the WAL, and with it every frame the lazy commits left there.
            None => self
                .conn
                .pragma_update(None, "user_version", SCHEMA)
                .map_err(StoreError::from),
        };
        match done.and_then(|()| Ok(self.conn.execute_batch("COMMIT")?)) {
            Ok(()) => {
                self.unsynced = !durable;
                Ok(())
            }
            Err(e) => {
                let _ = self.conn.execute_batch("ROLLBACK");
                Err(e)
            }
        }
    }

    /// Whether commits made without fsync may not be on disk yet.
    pub fn unsynced(&self) -> bool {
        self.unsynced
    }

    /// The saved fair-share usage (empty when none was saved).
    pub fn load_fs_usage(&self) -> Result<UsageLedger, StoreError> {
        let data: Option<Vec<u8>> = self
            .conn
            .query_row("SELECT data FROM kv WHERE key = ?1", [FS_USAGE_KEY], |r| {
                r.get(0)
            })
            .map(Some)
            .or_else(|e| match e {
                rusqlite::Error::QueryReturnedNoRows => Ok(None),
                e => Err(e),
            })?;
        match data {
            None => Ok(UsageLedger::default()),
            Some(d) => decode(&d).map_err(|e| StoreError::Record {
                id: 0,
                msg: format!("fair-share usage: {e}"),
            }),
        }
    }

    /// Replaces the saved fair-share usage.
    pub fn put_fs_usage(&mut self, l: &UsageLedger) -> Result<(), StoreError> {
        let data = encode(l).map_err(|e| StoreError::Record {
            id: 0,
            msg: format!("fair-share usage: {e}"),
        })?;
        self.conn.execute(
            "INSERT OR REPLACE INTO kv (key, data) VALUES (?1, ?2)",
            params![FS_USAGE_KEY, data],
        )?;
        Ok(())
    }

    /// Jobs to hold in memory at start: active ones and those that ended within
    /// `min_age` seconds of `now`; and the next job id.
    pub fn load(&self, now: i64, min_age: i64) -> Result<(Vec<Job>, u32), StoreError> {
        let mut stmt = self
            .conn
            .prepare("SELECT id, data FROM jobs WHERE active = 1 OR end >= ?1 ORDER BY id")?;
        let rows = stmt.query_map(params![now - min_age], |r| {
            Ok((r.get::<_, i64>(0)?, r.get::<_, Vec<u8>>(1)?))
        })?;
        let mut jobs = Vec::new();
        for row in rows {
            let (id, data) = row?;
            let job: Job = decode(&data).map_err(|e| StoreError::Record {
                id,
                msg: e.to_string(),
            })?;
            jobs.push(job);
        }
        let max: Option<i64> = self
            .conn
            .query_row("SELECT max(id) FROM jobs", [], |r| r.get(0))?;
        Ok((jobs, max.unwrap_or(0) as u32 + 1))
    }

    /// The association tree: the stored one, or the initial tree (root account, root
    /// user, QOS `normal`) when none was stored yet. Errors: undecodable rows, or rows
    /// that break the tree's invariants.
    pub fn load_assoc(&self) -> Result<AssocTree, StoreError> {
        let bad = |e: String| StoreError::Acct(e);
        let accounts: i64 = self
            .conn
            .query_row("SELECT count(*) FROM acct_accounts", [], |r| r.get(0))?;
        if accounts == 0 {
            return Ok(AssocTree::default());
        }
        fn rows<T: serde::de::DeserializeOwned>(
            conn: &Connection,
            sql: &str,
        ) -> Result<Vec<T>, StoreError> {
            let mut stmt = conn.prepare(sql)?;
            let data = stmt.query_map([], |r| r.get::<_, Vec<u8>>(0))?;
            let mut out = Vec::new();
            for d in data {
                out.push(decode(&d?).map_err(|e| StoreError::Acct(e.to_string()))?);
            }
            Ok(out)
        }
        let mut t = AssocTree {
            clusters: Vec::new(),
            accounts: Default::default(),
            users: Default::default(),
            user_assocs: rows::<UserAssoc>(
                &self.conn,
                "SELECT data FROM acct_assocs ORDER BY seq",
            )?,
            qos: Default::default(),
            // Not stored: the ids in use bound the next one (set below).
            last_id: 0,
        };
        let mut stmt = self
            .conn
            .prepare("SELECT name FROM acct_clusters ORDER BY rowid")?;
        for n in stmt.query_map([], |r| r.get::<_, String>(0))? {
            t.clusters.push(AcctCluster { name: n? });
        }
        for a in rows::<Account>(&self.conn, "SELECT data FROM acct_accounts")? {
            t.accounts.insert(a.name.clone(), a);
        }
        for u in rows::<User>(&self.conn, "SELECT data FROM acct_users")? {
            t.users.insert(u.name.clone(), u);
        }
        for q in rows::<Qos>(&self.conn, "SELECT data FROM acct_qos")? {
            t.qos.insert(q.name.clone(), q);
        }
        t.check().map_err(bad)?;
        // Trees stored before association ids get theirs now.
        t.assign_ids();
        Ok(t)
    }

    /// Replaces the stored association tree in one transaction (a savepoint inside a
    /// batch's transaction).
    pub fn put_assoc(&mut self, t: &AssocTree) -> Result<(), StoreError> {
        let tx = self.conn.savepoint()?;
        tx.execute_batch(
            "DELETE FROM acct_clusters; DELETE FROM acct_accounts; DELETE FROM acct_users;
             DELETE FROM acct_assocs; DELETE FROM acct_qos;",
        )?;
        for c in &t.clusters {
            tx.execute(
                "INSERT INTO acct_clusters (name) VALUES (?1)",
                params![c.name],
            )?;
        }
        for a in t.accounts.values() {
            tx.execute(
                "INSERT INTO acct_accounts (name, parent, data) VALUES (?1, ?2, ?3)",
                params![a.name, a.parent, enc(a)?],
            )?;
        }
        for u in t.users.values() {
            tx.execute(
                "INSERT INTO acct_users (name, default_account, data) VALUES (?1, ?2, ?3)",
                params![u.name, u.default_account, enc(u)?],
            )?;
        }
        for (i, a) in t.user_assocs.iter().enumerate() {
            tx.execute(
                "INSERT INTO acct_assocs (seq, user, account, partition, data)
                 VALUES (?1, ?2, ?3, ?4, ?5)",
                params![i as i64, a.user, a.account, a.partition, enc(a)?],
            )?;
        }
        for q in t.qos.values() {
            tx.execute(
                "INSERT INTO acct_qos (name, data) VALUES (?1, ?2)",
                params![q.name, enc(q)?],
            )?;
        }
        tx.commit()?;
        Ok(())
    }

    /// The TRES-minute usage a controller from before the single usage ledger kept
    /// apart (table `acct_usage`), and when it was decayed to; `None` when there is
    /// none. Read once at start to fold it into the ledger
    /// ([`Store::drop_legacy_usage`] then removes it).
    pub fn load_legacy_usage(&self) -> Result<Option<(UsedMins, i64)>, StoreError> {
        let row: Option<(i64, Vec<u8>)> = self
            .conn
            .query_row("SELECT at, data FROM acct_usage WHERE id = 0", [], |r| {
                Ok((r.get(0)?, r.get(1)?))
            })
            .map(Some)
            .or_else(|e| match e {
                rusqlite::Error::QueryReturnedNoRows => Ok(None),
                e => Err(e),
            })?;
        row.map(|(at, data)| {
            Ok((
                decode(&data).map_err(|e| StoreError::Acct(e.to_string()))?,
                at,
            ))
        })
        .transpose()
    }

    /// Removes the usage [`Store::load_legacy_usage`] read, once it is in the ledger.
    pub fn drop_legacy_usage(&mut self) -> Result<(), StoreError> {
        self.conn.execute("DELETE FROM acct_usage", [])?;
        Ok(())
    }

    /// Writes the TRES-minute usage as controllers before the single ledger did (for
    /// the migration test).
    #[cfg(test)]
    fn put_legacy_usage(&mut self, u: &UsedMins, at: i64) -> Result<(), StoreError> {
        let data = encode(u).map_err(|e| StoreError::Acct(e.to_string()))?;
        self.conn.execute(
            "INSERT OR REPLACE INTO acct_usage (id, at, data) VALUES (0, ?1, ?2)",
            params![at, data],
        )?;
        Ok(())
    }

    /// Writes job records in one transaction (a savepoint inside a batch's
    /// transaction).
    pub fn put_all(&mut self, jobs: &[Box<Job>]) -> Result<(), StoreError> {
        let tx = self.conn.savepoint()?;
        {
            let mut stmt = tx.prepare_cached(
                "INSERT OR REPLACE INTO jobs (id, uid, submit, start, end, active, data, array_job_id)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
            )?;
            for j in jobs {
                let data = encode(j.as_ref()).map_err(|e| StoreError::Record {
                    id: i64::from(j.id),
                    msg: e.to_string(),
                })?;
                stmt.execute(params![
                    j.id,
                    j.uid,
                    j.submit_time,
                    j.start_time,
                    j.end_time,
                    j.is_active(),
                    data,
                    group_id(j)
                ])?;
            }
        }
        tx.commit()?;
        Ok(())
    }

    /// The live reservations saved last.
    pub fn load_resvs(&self) -> Result<Vec<Reservation>, StoreError> {
        let mut stmt = self.conn.prepare("SELECT data FROM resvs ORDER BY name")?;
        let rows = stmt.query_map([], |r| r.get::<_, Vec<u8>>(0))?;
        let mut out = Vec::new();
        for row in rows {
            let data = row?;
            out.push(decode(&data).map_err(|e| StoreError::Record {
                id: 0,
                msg: format!("reservation: {e}"),
            })?);
        }
        Ok(out)
    }

    /// Replaces the live reservations (in one transaction, or a savepoint inside a
    /// batch's transaction).
    pub fn put_resvs(&mut self, list: &[Reservation]) -> Result<(), StoreError> {
        let tx = self.conn.savepoint()?;
        tx.execute("DELETE FROM resvs", [])?;
        for r in list {
            let data = encode(r).map_err(|e| StoreError::Record {
                id: 0,
                msg: format!("reservation {}: {e}", r.name),
            })?;
            tx.execute(
                "INSERT INTO resvs (name, data) VALUES (?1, ?2)",
                params![r.name, data],
            )?;
        }
        tx.commit()?;
        Ok(())
    }

    /// Appends a used reservation window to the history.
    pub fn put_resv_history(&mut self, r: &Reservation) -> Result<(), StoreError> {
        let data = encode(r).map_err(|e| StoreError::Record {
            id: 0,
            msg: format!("reservation {}: {e}", r.name),
        })?;
        self.conn.execute(
            "INSERT INTO resv_history (start, end, data) VALUES (?1, ?2, ?3)",
            params![r.start, r.end, data],
        )?;
        Ok(())
    }

    /// Past reservation windows overlapping `[start, end)`.
    pub fn resv_history(&self, start: i64, end: i64) -> Result<Vec<Reservation>, StoreError> {
        let mut stmt = self
            .conn
            .prepare("SELECT data FROM resv_history WHERE start < ?2 AND end > ?1 ORDER BY id")?;
        let rows = stmt.query_map(params![start, end], |r| r.get::<_, Vec<u8>>(0))?;
        let mut out = Vec::new();
        for row in rows {
            out.push(decode(&row?).map_err(|e| StoreError::Record {
                id: 0,
                msg: format!("reservation: {e}"),
            })?);
        }
        Ok(out)
    }

    /// Node down intervals overlapping `[start, end)`.
    pub fn node_down(&self, start: i64, end: i64) -> Result<Vec<(String, i64, i64)>, StoreError> {
        let mut stmt = self.conn.prepare(
            "SELECT node, start, end FROM node_down WHERE start < ?2 AND end > ?1 ORDER BY rowid",
        )?;
        let rows = stmt.query_map(params![start, end], |r| {
            Ok((
                r.get::<_, String>(0)?,
                r.get::<_, i64>(1)?,
                r.get::<_, i64>(2)?,
            ))
        })?;
        Ok(rows.collect::<Result<_, _>>()?)
    }

    /// The epoch second the cluster's database was created (0 when unreadable).
    pub fn created(&self) -> Result<i64, StoreError> {
        let data: Vec<u8> =
            self.conn
                .query_row("SELECT data FROM kv WHERE key = ?1", [CREATED_KEY], |r| {
                    r.get(0)
                })?;
        Ok(String::from_utf8_lossy(&data).trim().parse().unwrap_or(0))
    }

    /// Job records that ran during `[start, end)` (started before its end, not ended
    /// before its start).
    pub fn ran_during(&self, start: i64, end: i64) -> Result<Vec<Job>, StoreError> {
        let mut stmt = self.conn.prepare(
            "SELECT id, data FROM jobs WHERE start IS NOT NULL AND start < ?2
             AND (end IS NULL OR end > ?1) ORDER BY id",
        )?;
        let rows = stmt.query_map(params![start, end], |r| {
            Ok((r.get::<_, i64>(0)?, r.get::<_, Vec<u8>>(1)?))
        })?;
        let mut out = Vec::new();
        for row in rows {
            let (id, data) = row?;
            out.push(decode(&data).map_err(|e| StoreError::Record {
                id,
                msg: e.to_string(),
            })?);
        }
        Ok(out)
    }

    /// Jobs matching an accounting query.
    pub fn query(&self, q: &AcctQuery) -> Result<Vec<Job>, StoreError> {
        let mut sql = String::from("SELECT id, data FROM jobs WHERE 1=1");
        if let Some(end) = q.end {
            sql.push_str(&format!(" AND submit <= {end}"));
        }
        if let Some(start) = q.start {
            sql.push_str(&format!(" AND (end IS NULL OR end >= {start})"));
        }
        if !q.ids.is_empty() {
            let ids: Vec<String> = q.ids.iter().map(|i| i.to_string()).collect();
            // An array's (or heterogeneous job's) id names every record of it.
            let ids = ids.join(",");
            sql.push_str(&format!(" AND (id IN ({ids}) OR array_job_id IN ({ids}))"));
        }
        if !q.users.is_empty() {
            let u: Vec<String> = q.users.iter().map(|i| i.to_string()).collect();
            sql.push_str(&format!(" AND uid IN ({})", u.join(",")));
        }
        sql.push_str(" ORDER BY id");
        let mut stmt = self.conn.prepare(&sql)?;
        let rows = stmt.query_map([], |r| Ok((r.get::<_, i64>(0)?, r.get::<_, Vec<u8>>(1)?)))?;
        let mut out = Vec::new();
        for row in rows {
            let (id, data) = row?;
            let j: Job = decode(&data).map_err(|e| StoreError::Record {
                id,
                msg: e.to_string(),
            })?;
            if (q.states.is_empty() || q.states.contains(&j.state))
                && (q.names.is_empty() || q.names.contains(&j.spec.name))
                && (q.partitions.is_empty() || q.partitions.contains(&j.partition))
                && (q.accounts.is_empty() || q.accounts.contains(&j.account))
                && (q.qos.is_empty() || q.qos.contains(&j.qos))
                && (q.nodes.is_empty() || ran_on_any(&j, &q.nodes))
            {
                out.push(j);
            }
        }
        Ok(out)
    }
}

/// Whether the job (this run or an earlier one) held any of `nodes`.
fn ran_on_any(j: &Job, nodes: &[String]) -> bool {
    let held = |a: &Option<crate::model::job::Allocation>| {
        a.as_ref()
            .is_some_and(|a| a.nodes.iter().any(|n| nodes.contains(n)))
    };
    held(&j.alloc) || j.past_runs.iter().any(|r| held(&r.alloc))
}

/// The store thread's loop: block for one batch of ops (all an actor iteration queued,
/// see [`Outbox`]), take every other batch queued, write all of it in one transaction (fsynced when it releases a reply, see [`Commit::plan`]), then
/// release replies and answer queries. Exits when every sender is gone (closing the
/// database then checkpoints and syncs whatever was committed lazily). A failed commit
/// is fatal for the controller (returns the error), so that no client is told a job
/// exists that was not written.
pub fn run(
    mut store: Store,
    mut rx: mpsc::UnboundedReceiver<Vec<StoreOp>>,
) -> Result<(), StoreError> {
    while let Some(mut queued) = rx.blocking_recv() {
        while let Ok(more) = rx.try_recv() {
            queued.extend(more);
        }
        // The job records, taken out of the batch (all its writes share one
        // transaction, so their order relative to the other ops does not matter).
        let mut puts: Vec<Box<Job>> = Vec::new();
        let mut slot_of: std::collections::HashMap<u32, usize> = Default::default();
        let mut batch = Vec::with_capacity(queued.len());
        for op in queued {
            match op {
                // Later records of the same job replace earlier ones in this batch.
                StoreOp::Put(j) => match slot_of.get(&j.id) {
                    Some(&i) => puts[i] = j,
                    None => {
                        slot_of.insert(j.id, puts.len());
                        puts.push(j);
                    }
                },
                other => batch.push(other),
            }
        }
        // The last tree and usage of the batch are what counts.
        let assoc = batch.iter().rev().find_map(|op| match op {
            StoreOp::PutAssoc(t) => Some(t.as_ref()),
            _ => None,
        });
        let ledger = batch.iter().rev().find_map(|op| match op {
            StoreOp::PutFsUsage(l) => Some(l.as_ref()),
            _ => None,
        });
        let writes = !puts.is_empty()
            || assoc.is_some()
            || ledger.is_some()
            || batch.iter().any(|op| {
                matches!(
                    op,
                    StoreOp::Resvs(_) | StoreOp::ResvHistory(_) | StoreOp::NodeDown(..)
                )
            });
        let acknowledges = batch.iter().any(|op| matches!(op, StoreOp::Reply(..)));
        let submits = batch
            .iter()
            .any(|op| matches!(op, StoreOp::Reply(_, Response::Submitted { .. })));
        let launches = batch.iter().any(|op| match op {
            StoreOp::Forward(m) => m
                .iter()
                .any(|(_, msg)| matches!(msg, crate::proto::ToAgent::Launch(..))),
            _ => false,
        });
        let ends = puts
            .iter()
            .any(|j| !j.is_active() && j.state != crate::model::JobState::Pending);
        let steps = batch.iter().any(|op| match op {
            StoreOp::Forward(m) => m
                .iter()
                .any(|(_, msg)| matches!(msg, crate::proto::ToAgent::LaunchStep(..))),
            _ => false,
        });
        if submits {
            crate::failpoint::hit("submit-before-commit");
        }
        if ends {
            crate::failpoint::hit("end-before-commit");
        }
        if steps {
            crate::failpoint::hit("step-before-commit");
        }
        if launches {
            crate::failpoint::hit("launch-before-commit");
        }
        let how = Commit::plan(writes, acknowledges, store.unsynced());
        let mut write_all = |store: &mut Store| -> Result<(), StoreError> {
            if !puts.is_empty() {
                store.put_all(&puts)?;
            }
            if let Some(t) = assoc {
                store.put_assoc(t)?;
            }
            if let Some(l) = ledger {
                store.put_fs_usage(l)?;
            }
            for op in &batch {
                match op {
                    StoreOp::Resvs(list) => store.put_resvs(list)?,
                    StoreOp::ResvHistory(r) => store.put_resv_history(r)?,
                    StoreOp::NodeDown(n, s, e) => {
                        store.conn.execute(
                            "INSERT INTO node_down (node, start, end) VALUES (?1, ?2, ?3)",
                            params![n, s, e],
                        )?;
                    }
                    _ => {}
                }
            }
            Ok(())
        };
        let write: BatchWrite<'_> = &mut write_all;
        let written = store.commit_batch(how, writes.then_some(write));
        if let Err(e) = written {
            // Fail-stop: nothing may be acknowledged that was not saved. Waiting
            // clients hear why; the controller stops once it sees the store gone.
            tracing::error!("cannot write the state database: {e}; the controller stops");
            for op in batch {
                if let StoreOp::Reply(tx, _)
                | StoreOp::Query(_, tx, _)
                | StoreOp::Usage(_, _, _, tx) = op
                {
                    let _ = tx.send(Response::Error(crate::proto::SlurmError::Other(format!(
                        "the controller could not save its state ({e}) and is stopping"
                    ))));
                }
            }
            return Err(e);
        }
        if submits {
            crate::failpoint::hit("submit-after-commit");
        }
        if ends {
            crate::failpoint::hit("end-after-commit");
        }
        if steps {
            crate::failpoint::hit("step-after-commit");
        }
        if launches {
            crate::failpoint::hit("launch-after-commit");
        }
        for op in batch {
            match op {
                StoreOp::Put(_)
                | StoreOp::PutAssoc(_)
                | StoreOp::PutFsUsage(_)
                | StoreOp::Resvs(_)
                | StoreOp::ResvHistory(_)
                | StoreOp::NodeDown(..) => {}
                StoreOp::Forward(msgs) => {
                    for (tx, msg) in msgs {
                        // A link that is gone has told the actor already.
                        let _ = tx.send(msg);
                    }
                }
                StoreOp::Usage(start, end, mut rep, tx) => {
                    let got = store
                        .ran_during(start, end)
                        .and_then(|j| Ok((j, store.resv_history(start, end)?)))
                        .and_then(|(j, p)| Ok((j, p, store.node_down(start, end)?)));
                    let resp = match got {
                        Ok((jobs, past, down)) => {
                            rep.created = store.created().unwrap_or(0);
                            rep.jobs = jobs;
                            rep.resvs.extend(past);
                            rep.down.extend(down);
                            Response::Usage(rep)
                        }
                        Err(e) => Response::Error(crate::proto::SlurmError::Other(e.to_string())),
                    };
                    let _ = tx.send(resp);
                }
                StoreOp::Reply(tx, resp) => {
                    let _ = tx.send(resp);
                }
                StoreOp::Query(q, tx, now) => {
                    let resp = match store.query(&q) {
                        Ok(jobs) => Response::Acct { jobs, now },
                        Err(e) => Response::Error(crate::proto::SlurmError::Other(e.to_string())),
                    };
                    let _ = tx.send(resp);
                }
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod fs_usage_tests {
    use super::*;

    #[test]
    fn fair_share_usage_survives_reopening() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("sluice.db");
        let mut s = Store::open(&path).unwrap();
        assert_eq!(s.load_fs_usage().unwrap(), UsageLedger::default());
        let mut l = UsageLedger {
            decayed_at: 50,
            accrued_at: 60,
            ..Default::default()
        };
        l.charge(("a".into(), "alice".into()), 12.5);
        s.put_fs_usage(&l).unwrap();
        l.charge(("b".into(), "bob".into()), 1.0);
        s.put_fs_usage(&l).unwrap();
        drop(s);
        let s = Store::open(&path).unwrap();
        assert_eq!(s.load_fs_usage().unwrap(), l);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::acct_ops::{AcctOp, Entity, Setting, apply};

    #[test]
    fn a_schema_2_database_loads_with_the_initial_tree_and_keeps_a_new_one() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("sluice.db");
        {
            // What a schema-2 build left: the jobs table only.
            let conn = Connection::open(&path).unwrap();
            conn.execute_batch(
                "CREATE TABLE jobs (id INTEGER PRIMARY KEY, uid INTEGER NOT NULL,
                   submit INTEGER NOT NULL, start INTEGER, end INTEGER,
                   active INTEGER NOT NULL, data BLOB NOT NULL,
                   array_job_id INTEGER NOT NULL DEFAULT 0);",
            )
            .unwrap();
            conn.pragma_update(None, "application_id", APP_ID).unwrap();
            conn.pragma_update(None, "user_version", 2).unwrap();
        }
        let mut s = Store::open(&path).unwrap();
        assert_eq!(s.load_assoc().unwrap(), AssocTree::default());
        assert_eq!(s.load_legacy_usage().unwrap(), None);

        let mut t = AssocTree::default();
        for (e, n, a) in [
            (Entity::Account, "phys", vec!["GrpTRES=gres/gpu=4"]),
            (Entity::User, "alice", vec!["Account=phys", "Partition=gpu"]),
            (Entity::Qos, "high", vec!["Priority=10", "Preempt=normal"]),
            (Entity::Cluster, "other", vec![]),
        ] {
            let op = AcctOp::Add {
                entity: e,
                names: vec![n.into()],
                settings: a.iter().map(|x| Setting::parse(x).unwrap()).collect(),
            };
            apply(&mut t, &op, "lab").unwrap();
        }
        s.put_assoc(&t).unwrap();
        let mut used = UsedMins::default();
        used.record(
            &t,
            ("alice", "phys", "high"),
            &[("cpu".to_string(), 2)].into(),
            30.0,
        );
        s.put_legacy_usage(&used, 1234).unwrap();
        drop(s);
        let mut s = Store::open(&path).unwrap();
        assert_eq!(s.load_assoc().unwrap(), t);
        assert_eq!(s.load_legacy_usage().unwrap(), Some((used, 1234)));
        s.drop_legacy_usage().unwrap();
        assert_eq!(s.load_legacy_usage().unwrap(), None);
    }
}

#[cfg(test)]
mod durability_tests {
    use super::*;
    use crate::ctld::testutil::{ALICE, cluster_with, spec, submit};

    /// Two job records as the controller holds them.
    fn two_jobs() -> (Box<Job>, Box<Job>) {
        let mut c = cluster_with(4, "");
        let a = submit(&mut c, spec("a"), ALICE, 100);
        let b = submit(&mut c, spec("b"), ALICE, 100);
        (c.jobs[&a].clone(), c.jobs[&b].clone())
    }

    fn synchronous(s: &Store) -> i64 {
        s.conn
            .query_row("PRAGMA synchronous", [], |r| r.get(0))
            .unwrap()
    }

    #[test]
    fn only_batches_that_release_a_reply_commit_durably() {
        use Commit::{Durable, Lazy, Nothing};
        assert_eq!(Commit::plan(true, true, false), Durable);
        assert_eq!(Commit::plan(true, true, true), Durable);
        assert_eq!(Commit::plan(true, false, false), Lazy);
        assert_eq!(Commit::plan(true, false, true), Lazy);
        // A reply after lazy commits makes them durable first, with nothing new to write.
        assert_eq!(Commit::plan(false, true, true), Durable);
        assert_eq!(Commit::plan(false, true, false), Nothing);
        assert_eq!(Commit::plan(false, false, true), Nothing);
        assert_eq!(Commit::plan(false, false, false), Nothing);
    }

    #[test]
    fn lazy_commits_are_saved_and_made_durable_by_the_next_acknowledged_one() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("sluice.db");
        let (a, b) = two_jobs();
        let mut s = Store::open(&path).unwrap();
        // FULL from the start: what the controller writes while starting up is durable.
        assert_eq!(synchronous(&s), 2);
        let mut put_a = |s: &mut Store| s.put_all(std::slice::from_ref(&a));
        s.commit_batch(Commit::Lazy, Some(&mut put_a)).unwrap();
        assert!(s.unsynced());
        assert_eq!(synchronous(&s), 1, "a lazy batch commits with NORMAL");
        let mut put_b = |s: &mut Store| s.put_all(std::slice::from_ref(&b));
        s.commit_batch(Commit::Lazy, Some(&mut put_b)).unwrap();
        s.commit_batch(Commit::Durable, None).unwrap();
        assert!(!s.unsynced());
        assert_eq!(synchronous(&s), 2);
        // Nothing to do: no transaction at all.
        s.commit_batch(Commit::Nothing, None).unwrap();
        drop(s);
        let s = Store::open(&path).unwrap();
        let (jobs, next) = s.load(100, 0).unwrap();
        assert_eq!(jobs, vec![*a.clone(), *b.clone()]);
        assert_eq!(next, b.id + 1);
    }

    #[test]
    fn a_failed_batch_is_rolled_back_whole() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("sluice.db");
        let (a, _) = two_jobs();
        let mut s = Store::open(&path).unwrap();
        let mut half = |s: &mut Store| -> Result<(), StoreError> {
            s.put_all(std::slice::from_ref(&a))?;
            s.conn.execute("INSERT INTO no_such_table VALUES (1)", [])?;
            Ok(())
        };
        assert!(s.commit_batch(Commit::Durable, Some(&mut half)).is_err());
        assert_eq!(s.load(100, 0).unwrap().0, Vec::<Job>::new());
        // The connection is usable again afterwards.
        let mut put_a = |s: &mut Store| s.put_all(std::slice::from_ref(&a));
        s.commit_batch(Commit::Durable, Some(&mut put_a)).unwrap();
        assert_eq!(s.load(100, 0).unwrap().0, vec![*a.clone()]);
    }

    #[test]
    fn the_store_thread_saves_the_last_record_of_a_job_before_it_replies() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("sluice.db");
        let (a, b) = two_jobs();
        let mut later = a.clone();
        later.spec.comment = Some("second record".into());
        let (tx, rx) = mpsc::unbounded_channel();
        let (rtx, mut rrx) = oneshot::channel();
        let mut out = Outbox::new(tx);
        out.send(StoreOp::Put(a.clone()));
        out.send(StoreOp::Put(b.clone()));
        out.flush();
        out.send(StoreOp::Put(later.clone()));
        out.send(StoreOp::Reply(rtx, Response::Ok));
        out.flush();
        drop(out);
        run(Store::open(&path).unwrap(), rx).unwrap();
        assert_eq!(rrx.try_recv().unwrap(), Response::Ok);
        let (jobs, _) = Store::open(&path).unwrap().load(100, 0).unwrap();
        assert_eq!(jobs, vec![*later, *b]);
    }
}

//! Standard Workload Format traces (the Parallel Workloads Archive's `.swf`, plain or
//! gzip-compressed): 18 whitespace-separated fields per job, `;` header comments.
//!
//! Conventions (shared/traces/README.md): size = requested processors (field 8) when
//! positive, else allocated processors (field 5); run time = field 4; jobs with a
//! negative run time, no size, or a size above the machine (`MaxProcs`, else
//! `MaxNodes`) are dropped; the time limit is the requested time (field 9) when
//! positive, else the run time.

use std::io::Read;
use std::path::Path;

/// One job of a trace, after the conventions above.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SwfJob {
    /// Field 1.
    pub id: u64,
    /// Submit time, seconds from the trace start (field 2).
    pub submit: i64,
    /// Actual run time, seconds (field 4).
    pub run: i64,
    /// Processors.
    pub size: u32,
    /// Requested time, seconds.
    pub limit: i64,
    /// User id (field 12; -1 when unknown).
    pub user: i64,
    /// Queue number (field 15; -1 when unknown): the QOS, numbered from 1, when the
    /// simulation has QOS.
    pub queue: i64,
    /// Partition number (field 16; -1 when unknown): the configured partition,
    /// numbered from 1 in configuration order.
    pub partition: i64,
}

/// A parsed trace.
#[derive(Debug, Clone, Default)]
pub struct Trace {
    /// Processors of the machine (`MaxProcs`, else `MaxNodes`, else the largest job).
    pub max_procs: u32,
    /// Kept jobs, in submit order.
    pub jobs: Vec<SwfJob>,
    /// Job lines dropped by the conventions.
    pub dropped: usize,
}

/// Why a trace could not be read.
#[derive(Debug, thiserror::Error)]
pub enum SwfError {
    #[error("cannot read {path}: {source}")]
    Io {
        path: String,
        source: std::io::Error,
    },
    #[error("line {line}: {msg}")]
    Syntax { line: usize, msg: String },
}

/// Reads a `.swf` or `.swf.gz` file (gzip is recognised by its magic bytes).
///
/// Errors: I/O and decompression errors, malformed job lines.
pub fn read(path: &Path) -> Result<Trace, SwfError> {
    let io = |source| SwfError::Io {
        path: path.display().to_string(),
        source,
    };
    let raw = std::fs::read(path).map_err(io)?;
    let text = if raw.starts_with(&[0x1f, 0x8b]) {
        let mut s = String::new();
        flate2::read::MultiGzDecoder::new(&raw[..])
            .read_to_string(&mut s)
            .map_err(io)?;
        s
    } else {
        String::from_utf8_lossy(&raw).into_owned()
    };
    parse(&text)
}

/// Parses SWF text.
///
/// Errors: a job line with fewer than 9 numeric fields.
pub fn parse(text: &str) -> Result<Trace, SwfError> {
    let mut max_procs = None;
    let mut max_nodes = None;
    let mut raw = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let line = line.trim();
        if let Some(h) = line.strip_prefix(';') {
            let h = h.trim();
            let num = |k: &str| h.strip_prefix(k).and_then(|v| v.trim().parse::<u32>().ok());
            if let Some(n) = num("MaxProcs:") {
                max_procs = Some(n);
            }
            if let Some(n) = num("MaxNodes:") {
                max_nodes = Some(n);
            }
            continue;
        }
        if line.is_empty() {
            continue;
        }
        let f: Vec<f64> = line
            .split_whitespace()
            .map(|x| x.parse::<f64>())
            .collect::<Result<_, _>>()
            .map_err(|e| SwfError::Syntax {
                line: i + 1,
                msg: e.to_string(),
            })?;
        if f.len() < 9 {
            return Err(SwfError::Syntax {
                line: i + 1,
                msg: format!("{} fields, expected 18", f.len()),
            });
        }
        raw.push(f);
    }
    let cap = max_procs.or(max_nodes);
    let mut t = Trace::default();
    for f in raw {
        let run = f[3] as i64;
        let size = if f[7] > 0.0 { f[7] } else { f[4] } as i64;
        if run < 0 || size <= 0 || cap.is_some_and(|c| size > i64::from(c)) {
            t.dropped += 1;
            continue;
        }
        let limit = if f[8] > 0.0 { f[8] as i64 } else { run };
        t.jobs.push(SwfJob {
            id: f[0] as u64,
            submit: f[1] as i64,
            run,
            size: size as u32,
            limit,
            user: f.get(11).map_or(-1, |u| *u as i64),
            queue: f.get(14).map_or(-1, |q| *q as i64),
            partition: f.get(15).map_or(-1, |p| *p as i64),
        });
    }
    t.jobs.sort_by_key(|j| (j.submit, j.id));
    t.max_procs = cap.unwrap_or_else(|| t.jobs.iter().map(|j| j.size).max().unwrap_or(1));
    Ok(t)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn conventions() {
        let t = parse(
            "; MaxProcs: 8\n\
             1 10 5 100 4 -1 -1 -1 -1 -1 1 3 -1 -1 -1 -1 -1 -1\n\
             2 5 0 50 -1 -1 -1 2 600 -1 1 4 -1 -1 -1 -1 -1 -1\n\
             3 20 0 -1 2 -1 -1 2 600 -1 0 4 -1 -1 -1 -1 -1 -1\n\
             4 30 0 10 16 -1 -1 -1 60 -1 1 4 -1 -1 -1 -1 -1 -1\n\
             5 40 0 10 -1 -1 -1 -1 60 -1 1 4 -1 -1 -1 -1 -1 -1\n",
        )
        .unwrap();
        assert_eq!(t.max_procs, 8);
        assert_eq!(t.dropped, 3);
        assert_eq!(t.jobs.len(), 2);
        assert_eq!((t.jobs[0].id, t.jobs[0].size, t.jobs[0].limit), (2, 2, 600));
        assert_eq!((t.jobs[1].id, t.jobs[1].size, t.jobs[1].limit), (1, 4, 100));
        assert!(parse("1 2 3\n").is_err());
    }

    #[test]
    fn max_nodes_when_no_max_procs() {
        let t =
            parse("; MaxNodes: 256\n1 0 -1 5 16 -1 -1 -1 -1 -1 1 -1 -1 -1 0 -1 -1 -1\n").unwrap();
        assert_eq!(t.max_procs, 256);
        assert_eq!(t.jobs[0].limit, 5);
    }
}

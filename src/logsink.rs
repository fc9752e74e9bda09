//! Where daemons' log lines go when they log to stderr.
//!
//! A daemon's stderr may be a pipe whose reader has gone (`sluice controller
//! --foreground | head`, an SSH channel closing under an agent). The log must not take
//! the daemon down then: tracing-subscriber reports a failed write by printing to
//! stderr itself, which panics on the same broken pipe. [`stderr`] gives a writer that
//! drops what cannot be written.
//!
//! The controller's level can change while it runs (`scontrol setdebug`, cf. Slurm's
//! `slurm_set_debug_level`): [`init_reloadable`] installs the subscriber with a
//! reloadable filter, [`set_level`] replaces it.

use std::io::{self, Write};

/// A writer that reports every write as done, even when it failed.
pub struct Lossy<W>(W);

impl<W: Write> Write for Lossy<W> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let _ = self.0.write_all(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        let _ = self.0.flush();
        Ok(())
    }
}

/// Standard error, [`Lossy`]; pass the function itself to `with_writer`.
pub fn stderr() -> Lossy<io::Stderr> {
    Lossy(io::stderr())
}

/// The filter of the subscriber [`init_reloadable`] installed.
static FILTER: std::sync::OnceLock<
    tracing_subscriber::reload::Handle<tracing_subscriber::EnvFilter, tracing_subscriber::Registry>,
> = std::sync::OnceLock::new();

/// Whether standard error is the journal's stream (systemd's `JOURNAL_STREAM`, "dev:ino",
/// names the stream it connected stderr to): journald stamps each line itself.
pub fn stderr_is_journal() -> bool {
    let Ok(v) = std::env::var("JOURNAL_STREAM") else {
        return false;
    };
    let Ok(st) = nix::sys::stat::fstat(2) else {
        return false;
    };
    v == format!("{}:{}", st.st_dev, st.st_ino)
}

/// Installs the process's subscriber: lines to [`stderr`] through `filter`, which
/// [`set_level`] may later replace; coloured when `ansi`, without timestamps when
/// stderr is the journal ([`stderr_is_journal`]). Does nothing when a subscriber is
/// already set.
pub fn init_reloadable(filter: tracing_subscriber::EnvFilter, ansi: bool) {
    use tracing_subscriber::prelude::*;
    let (layer, handle) = tracing_subscriber::reload::Layer::new(filter);
    let journal = stderr_is_journal();
    let timed = (!journal).then(|| {
        tracing_subscriber::fmt::layer()
            .with_writer(stderr)
            .with_ansi(ansi)
    });
    let untimed = journal.then(|| {
        tracing_subscriber::fmt::layer()
            .with_writer(stderr)
            .with_ansi(false)
            .without_time()
    });
    if tracing_subscriber::registry()
        .with(layer)
        .with(timed)
        .with(untimed)
        .try_init()
        .is_ok()
    {
        let _ = FILTER.set(handle);
    }
}

/// Slurm's debug level names, by number (`scontrol setdebug` takes either).
pub const SLURM_LEVELS: [&str; 10] = [
    "quiet", "fatal", "error", "info", "verbose", "debug", "debug2", "debug3", "debug4", "debug5",
];

/// The tracing filter for a Slurm debug level name or number (`quiet`, `fatal`,
/// `error`, `info`, `verbose`, `debug`, `debug2`…`debug5`, `0`–`9`); `None` when it is
/// neither.
pub fn filter_for(level: &str) -> Option<&'static str> {
    let i = match level.parse::<usize>() {
        Ok(n) if n < SLURM_LEVELS.len() => n,
        _ => SLURM_LEVELS
            .iter()
            .position(|l| l.eq_ignore_ascii_case(level))?,
    };
    Some(match i {
        0 => "off",
        1 | 2 => "error",
        3 | 4 => "info",
        5 => "debug",
        _ => "trace",
    })
}

/// The Slurm debug level `by` steps above `level` (a name or number), by name and
/// capped at `debug5`: `slurmctld -v` raises the configured level one step per `-v`.
/// `None` when `level` is not a debug level.
pub fn raised(level: &str, by: usize) -> Option<&'static str> {
    filter_for(level)?;
    let i = match level.parse::<usize>() {
        Ok(n) => n,
        Err(_) => SLURM_LEVELS
            .iter()
            .position(|l| l.eq_ignore_ascii_case(level))?,
    };
    Some(SLURM_LEVELS[(i + by).min(SLURM_LEVELS.len() - 1)])
}

/// Sets the level of the subscriber [`init_reloadable`] installed. Errors: an unknown
/// level (Slurm's "invalid debug level" text), or no reloadable subscriber.
pub fn set_level(level: &str) -> Result<(), String> {
    let f = filter_for(level).ok_or_else(|| format!("invalid debug level: {level}"))?;
    let h = FILTER
        .get()
        .ok_or("this process's log level cannot be changed")?;
    // Said before the change, so that it shows even when the new level hides it.
    tracing::info!("Set debug level to '{level}'");
    h.reload(tracing_subscriber::EnvFilter::new(f))
        .map_err(|e| e.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A writer whose reader has gone.
    struct Broken;

    impl Write for Broken {
        fn write(&mut self, _: &[u8]) -> io::Result<usize> {
            Err(io::ErrorKind::BrokenPipe.into())
        }
        fn flush(&mut self) -> io::Result<()> {
            Err(io::ErrorKind::BrokenPipe.into())
        }
    }

    #[test]
    fn slurm_level_names_and_numbers() {
        assert_eq!(filter_for("quiet"), Some("off"));
        assert_eq!(filter_for("ERROR"), Some("error"));
        assert_eq!(filter_for("3"), Some("info"));
        assert_eq!(filter_for("debug"), Some("debug"));
        assert_eq!(filter_for("debug5"), Some("trace"));
        assert_eq!(filter_for("10"), None);
        assert_eq!(filter_for("loud"), None);
    }

    #[test]
    fn each_v_raises_the_level_one_step() {
        assert_eq!(raised("info", 0), Some("info"));
        assert_eq!(raised("info", 2), Some("debug"));
        assert_eq!(raised("error", 1), Some("info"));
        assert_eq!(raised("3", 1), Some("verbose"));
        assert_eq!(raised("debug4", 5), Some("debug5"));
        assert_eq!(raised("loud", 1), None);
    }

    #[test]
    fn failed_writes_are_dropped_not_reported() {
        let mut w = Lossy(Broken);
        assert_eq!(w.write(b"a log line\n").unwrap(), 11);
        assert!(w.flush().is_ok());
        assert!(writeln!(w, "formatted {}", 1).is_ok());
    }
}

//! Where daemons' log lines go when they log to stderr.
//!
//! A daemon's stderr may be a pipe whose reader has gone (`sluice controller
//! --foreground | head`, an SSH channel closing under an agent). The log must not take
//! the daemon down then: tracing-subscriber reports a failed write by printing to
//! stderr itself, which panics on the same broken pipe. [`stderr`] gives a writer that
//! drops what cannot be written.

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
    fn failed_writes_are_dropped_not_reported() {
        let mut w = Lossy(Broken);
        assert_eq!(w.write(b"a log line\n").unwrap(), 11);
        assert!(w.flush().is_ok());
        assert!(writeln!(w, "formatted {}", 1).is_ok());
    }
}

//! Interruption (Ctrl-C, `SIGTERM`) of a run that is writing its output.
//!
//! The binary's signal handler calls [`request`]. Every output being written holds an
//! [`Output`] for as long as it has something on disk to take back (a temporary file, an
//! import's tiles, a camera walk's frames) and gives up at its next [`Output::check`],
//! removing what it wrote, so an interrupted run leaves neither a temporary nor a partial
//! file. With no output in progress there is nothing to take back, and the handler may end
//! the process at once.
//!
//! The two counters are read and written in sequentially consistent order, so an output
//! that begins as the request arrives either is seen by [`request`] (the handler waits for
//! it) or sees the request itself and writes nothing.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering::SeqCst};

static REQUESTED: AtomicBool = AtomicBool::new(false);
static IN_PROGRESS: AtomicUsize = AtomicUsize::new(0);

/// Asks every output in progress to stop and take back what it wrote. Returns whether one
/// is in progress: if not, nothing is on disk to take back.
pub fn request() -> bool {
    REQUESTED.store(true, SeqCst);
    IN_PROGRESS.load(SeqCst) > 0
}

/// Whether an interruption was requested.
pub fn requested() -> bool {
    REQUESTED.load(SeqCst)
}

/// The work stopped because the run was interrupted (what it wrote is taken back).
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
#[error("interrupted")]
pub struct Interrupted;

/// An output being written: while one exists, an interruption leaves its taking back to
/// the writer (see the module docs).
#[derive(Debug)]
#[must_use = "an output is in progress only while its guard lives"]
pub struct Output(());

impl Output {
    /// Marks an output as begun, before it puts anything on disk; fails when an
    /// interruption came first.
    pub fn begin() -> Result<Output, Interrupted> {
        IN_PROGRESS.fetch_add(1, SeqCst);
        let output = Output(());
        output.check()?;
        Ok(output)
    }

    /// Fails once an interruption is requested: the writer then takes back its work.
    pub fn check(&self) -> Result<(), Interrupted> {
        if requested() {
            Err(Interrupted)
        } else {
            Ok(())
        }
    }
}

impl Drop for Output {
    fn drop(&mut self) {
        IN_PROGRESS.fetch_sub(1, SeqCst);
    }
}

/// A writer that fails once an interruption is requested, so a long write stops within a
/// buffer's worth of bytes.
pub(super) struct Watched<'o, W> {
    pub inner: W,
    pub output: &'o Output,
}

impl<W: std::io::Write> std::io::Write for Watched<'_, W> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.output.check().map_err(std::io::Error::other)?;
        self.inner.write(buf)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.inner.flush()
    }
}

//! The one writer of documents on stdout. A reader that went away
//! (`leasectl --json | head -1`) is [`Exit::ClosedPipe`] (141, 128 +
//! SIGPIPE), as a shell pipeline expects, and the command ends quietly; any
//! other write error is reported in a sentence by the caller.

use std::io::Write;

use crate::exit::Exit;

/// Why writing to stdout failed.
#[derive(Debug)]
pub enum WriteError {
    /// The reader went away (a broken pipe): end quietly with 141.
    Closed,
    /// Any other write error.
    Failed(std::io::Error),
}

impl From<std::io::Error> for WriteError {
    fn from(e: std::io::Error) -> Self {
        if e.kind() == std::io::ErrorKind::BrokenPipe {
            WriteError::Closed
        } else {
            WriteError::Failed(e)
        }
    }
}

impl std::fmt::Display for WriteError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            WriteError::Closed => f.write_str("the reader of stdout went away"),
            WriteError::Failed(e) => write!(f, "{e}"),
        }
    }
}

/// Writes `text` and a newline on stdout, and flushes.
///
/// # Errors
/// [`WriteError::Closed`] for a broken pipe, [`WriteError::Failed`] otherwise.
pub fn write_line(text: &str) -> Result<(), WriteError> {
    let mut out = std::io::stdout().lock();
    writeln!(out, "{text}").and_then(|()| out.flush())?;
    Ok(())
}

/// [`write_line`] for a command: a closed pipe is [`Exit::ClosedPipe`];
/// another error is said on stderr ("could not write to stdout") and is
/// [`Exit::Failed`].
///
/// # Errors
/// The [`Exit`] the command ends with when the text could not be written.
pub fn print(text: &str) -> Result<(), Exit> {
    print_as(text, "to stdout")
}

/// [`print`] of a whole document: the message says "could not write the
/// document to stdout".
///
/// # Errors
/// As [`print`].
pub fn print_document(text: &str) -> Result<(), Exit> {
    print_as(text, "the document to stdout")
}

/// [`print_document`] of a document that `write` writes as it is made
/// (never held whole), then a newline, through a buffer on stdout.
///
/// # Errors
/// As [`print`]; a document that cannot be serialised is said the same way.
pub fn print_document_with(
    write: impl FnOnce(&mut dyn Write) -> serde_json::Result<()>,
) -> Result<(), Exit> {
    let mut out = std::io::BufWriter::with_capacity(1 << 16, std::io::stdout().lock());
    let r = write(&mut out)
        .map_err(std::io::Error::from)
        .and_then(|()| out.write_all(b"\n"))
        .and_then(|()| out.flush());
    report_as(r.map_err(WriteError::from), "the document to stdout")
}

fn print_as(text: &str, what: &str) -> Result<(), Exit> {
    report_as(write_line(text), what)
}

fn report_as(written: Result<(), WriteError>, what: &str) -> Result<(), Exit> {
    match written {
        Ok(()) => Ok(()),
        Err(WriteError::Closed) => Err(Exit::ClosedPipe),
        Err(WriteError::Failed(e)) => {
            crate::exit::say(format!("could not write {what}: {e}"));
            Err(Exit::Failed)
        }
    }
}

/// A writer that remembers its first error, for commands that write their
/// output in many pieces: [`Checked::finish`] flushes and turns an error into
/// the command's exit (141 for a closed pipe, 1 with a sentence otherwise),
/// so no output that failed to be written ends with 0.
pub struct Checked<W: Write> {
    inner: W,
    error: Option<std::io::Error>,
}

impl<W: Write> Checked<W> {
    /// Wraps `inner`.
    pub fn new(inner: W) -> Self {
        Self { inner, error: None }
    }

    /// Flushes; `exit` when everything was written, else the write error's exit.
    pub fn finish(mut self, exit: Exit) -> Exit {
        match self.flush_checked() {
            Ok(()) => exit,
            Err(e) => e,
        }
    }

    /// Flushes, for a writer that goes on (`--watch`'s passes): the write
    /// error's exit if one happened since the last call (said on stderr as
    /// by [`Checked::finish`]).
    ///
    /// # Errors
    /// [`Exit::ClosedPipe`] for a closed pipe, [`Exit::Failed`] otherwise.
    pub fn flush_checked(&mut self) -> Result<(), Exit> {
        if self.error.is_none() {
            if let Err(e) = self.inner.flush() {
                self.error = Some(e);
            }
        }
        match self.error.take().map(WriteError::from) {
            None => Ok(()),
            Some(WriteError::Closed) => Err(Exit::ClosedPipe),
            Some(WriteError::Failed(e)) => {
                crate::exit::say(format!("could not write to stdout: {e}"));
                Err(Exit::Failed)
            }
        }
    }
}

impl<W: Write> Write for Checked<W> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        if self.error.is_some() {
            // Nothing more after the first error; the caller learns it at finish.
            return Ok(buf.len());
        }
        match self.inner.write(buf) {
            Ok(n) => Ok(n),
            Err(e) => {
                self.error = Some(e);
                Ok(buf.len())
            }
        }
    }

    fn flush(&mut self) -> std::io::Result<()> {
        if self.error.is_none() {
            if let Err(e) = self.inner.flush() {
                self.error = Some(e);
            }
        }
        Ok(())
    }
}

impl WriteError {
    /// The exit of a command whose output could not be written: 141 for a
    /// closed pipe, 1 otherwise.
    pub fn exit(&self) -> Exit {
        match self {
            WriteError::Closed => Exit::ClosedPipe,
            WriteError::Failed(_) => Exit::Failed,
        }
    }
}

//! Everything the command prints goes through here: a stdout that fails (a closed pipe, a full
//! disk) is an error the command ends on, never a panic as `println!` gives. A closed pipe
//! (`liandan predict … | head -2`) ends it quietly, as Unix tools do.

use std::io::{self, Write};

use crate::Failure;

/// One line on stdout.
macro_rules! say {
    ($($arg:tt)*) => {
        $crate::output::line(format_args!($($arg)*))
    };
}
pub(crate) use say;

/// One line on stderr: a note or a warning. Stderr failing leaves nothing to report it on, so
/// it is ignored.
macro_rules! note {
    ($($arg:tt)*) => {
        $crate::output::note_line(format_args!($($arg)*))
    };
}
pub(crate) use note;

pub fn line(text: std::fmt::Arguments) -> Result<(), Failure> {
    let mut out = io::stdout().lock();
    writeln!(out, "{text}").map_err(stdout_failed)
}

/// Text that already ends in a newline (a table).
pub fn text(text: &str) -> Result<(), Failure> {
    let mut out = io::stdout().lock();
    out.write_all(text.as_bytes()).map_err(stdout_failed)
}

/// Whatever is still buffered: the last write's failure shows here.
pub fn flush() -> Result<(), Failure> {
    io::stdout().lock().flush().map_err(stdout_failed)
}

pub fn note_line(text: std::fmt::Arguments) {
    let _ = writeln!(io::stderr().lock(), "{text}");
}

/// A write to stdout failed: quietly done for a closed pipe, else one line and status 2.
pub fn stdout_failed(e: io::Error) -> Failure {
    if e.kind() == io::ErrorKind::BrokenPipe {
        Failure::quiet()
    } else {
        Failure::usage(format!("cannot write to stdout ({e}); free space or point the output elsewhere"))
    }
}

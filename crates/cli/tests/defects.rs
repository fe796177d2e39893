//! The `liandan` command on inputs that used to crash it (issue 15): each must end with a
//! clear error and a plain failure status, never a panic (101) or an abort (134).

use std::process::{Command, Output};

fn liandan(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_liandan")).args(args).output().expect("the liandan binary runs")
}

#[test]
fn summary_with_an_absurd_batch_is_an_error_not_a_crash() {
    // usize::MAX: the shape overflows (a capacity panic before). 2^32: 12 TiB of input, which
    // the host refuses (an allocator abort before); refused, so nothing is ever allocated.
    for (batch, needle) in [("18446744073709551615", "too large"), ("4294967296", "cannot allocate")] {
        let o = liandan(&["summary", "mlp", "--batch", batch]);
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(!o.status.success(), "batch {batch}: succeeded");
        assert!(!matches!(o.status.code(), Some(101 | 134) | None), "batch {batch}: crashed with {:?}: {err}", o.status);
        assert!(err.contains(needle) && !err.contains("panicked"), "batch {batch}: {err}");
    }
}

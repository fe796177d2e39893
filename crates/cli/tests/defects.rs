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

/// `LIANDAN_DEVICE` naming a device that does not exist is an error naming the variable and
/// the devices there are (before, `info` warned and ran on the CPU with status 0); empty means
/// unset.
#[test]
fn liandan_device_naming_no_device_is_an_error() {
    for value in ["gpu:7", "gpu:x", "cuda"] {
        for args in [&["info"][..], &["train", "--max-samples", "16", "--epochs", "1"][..]] {
            let o = Command::new(env!("CARGO_BIN_EXE_liandan")).args(args).env("LIANDAN_DEVICE", value).output().expect("the liandan binary runs");
            let err = String::from_utf8_lossy(&o.stderr);
            assert_eq!(o.status.code(), Some(2), "LIANDAN_DEVICE={value} {args:?}: {err}");
            assert!(err.contains(&format!("LIANDAN_DEVICE=\"{value}\"")) && err.contains("cpu"), "LIANDAN_DEVICE={value} {args:?}: {err}");
        }
    }
    let o = Command::new(env!("CARGO_BIN_EXE_liandan")).arg("info").env("LIANDAN_DEVICE", "").output().expect("the liandan binary runs");
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success() && !err.contains("LIANDAN_DEVICE"), "an empty LIANDAN_DEVICE is unset: {err}");
}

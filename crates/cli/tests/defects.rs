//! The `liandan` command on inputs that used to crash it: each must end with a
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

/// Every setting's bad value is a one-line error naming it and what it accepts, with exit
/// status 2, whatever the command.
#[test]
fn a_bad_setting_is_an_error_naming_it() {
    let mut tables = vec![liandan_tensor::settings::SETTINGS, liandan_backend_cpu::settings::SETTINGS, liandan_train::settings::SETTINGS];
    #[cfg(feature = "wgpu")]
    tables.push(liandan_backend_wgpu::SETTINGS);
    for s in tables.into_iter().flatten() {
        let o = Command::new(env!("CARGO_BIN_EXE_liandan")).arg("zoo").env(s.name, s.kind.bad_value()).output().expect("the liandan binary runs");
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{}: {err}", s.name);
        assert!(err.starts_with(&format!("liandan: {}=", s.name)) && err.contains(&s.kind.expected()) && err.lines().count() == 1, "{}: {err}", s.name);
    }
}

/// `liandan info` lists the settings the environment changes from their defaults, and no others.
#[test]
fn info_lists_the_settings_that_differ_from_their_defaults() {
    let info = |vars: &[(&str, &str)]| {
        let o = Command::new(env!("CARGO_BIN_EXE_liandan"))
            .arg("info")
            .envs(vars.iter().copied())
            .env("LIANDAN_DEVICE", "cpu")
            .output()
            .expect("the liandan binary runs");
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        String::from_utf8_lossy(&o.stdout).lines().find(|l| l.starts_with("settings: ")).map(str::to_string)
    };
    assert_eq!(info(&[("LIANDAN_CPU_GEMM", "Tuned"), ("LIANDAN_FUSION", "1")]).as_deref(), Some("settings: LIANDAN_DEVICE=cpu LIANDAN_CPU_GEMM=tuned"));
}

//! The settings of the chores here (see `liandan_tensor::settings`).

use liandan_tensor::settings::{Kind, Setting};

/// This crate's settings.
pub const SETTINGS: &[Setting] = &[BENCH_PHASES];

pub const BENCH_PHASES: Setting = Setting {
    name: "LIANDAN_BENCH_PHASES",
    kind: Kind::Switch,
    default: "0",
    doc: "`1` makes `cargo xtask bench` print, on stderr, where each model's pipelined steps spent the host's time (recording, waiting for the submit thread and for the device, the submit thread's finish and submit) and their dispatches and bind groups made.",
    owner: "xtask",
};

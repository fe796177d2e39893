//! `liandan find-batch-size`: the largest batch whose full training step fits in the device's
//! memory, or in `--budget`, found by `liandan_train::batch_size::find_batch_size`.

use liandan_train::batch_size::{self, BatchSizeReport};

use crate::args::FindBatchSizeArgs;
use crate::common::{pick_device, precision_note};
use crate::output::{say, text};
use crate::Failure;

pub fn find_batch_size(a: &FindBatchSizeArgs) -> Result<(), Failure> {
    let spec = liandan_nn::zoo::spec(&a.model)?;
    let budget = match a.budget {
        Some(mib) if !(mib.is_finite() && mib > 0.0) => return Err(Failure::usage(format!("--budget {mib}: give a positive number of MiB such as 512"))),
        Some(mib) => Some((mib * MIB) as u64),
        None => None,
    };
    let (device, why) = pick_device(a.device.as_deref())?;
    if device.is_cpu() && budget.is_none() {
        return Err(Failure::usage(
            "on the CPU, give --budget MiB: the host swaps rather than failing an allocation, so only a budget can say what does not fit",
        ));
    }
    if device.memory_stats().is_none() {
        return Err(Failure::usage(format!("{device} keeps no memory statistics, so the search cannot tell what fits; use --device cpu or a GPU")));
    }
    say!("device: {device} ({why})")?;
    say!("precision: {}", precision_note(&device, a.precision, None))?;
    match budget {
        Some(b) => say!("searching for the largest batch of {} whose training step fits in {} (--budget), up to {}", spec.name, size(b), a.max)?,
        None => say!("searching for the largest batch of {} whose training step fits in {device}'s memory, up to {}", spec.name, a.max)?,
    }
    if budget.is_some() && !device.set_memory_budget(budget) {
        return Err(Failure::usage(format!("{device} cannot cap its memory; leave out --budget")));
    }
    let step = batch_size::zoo_step(spec.name, a.precision, &device)?;
    let found = batch_size::find_batch_size(&device, 1, a.max, step);
    if budget.is_some() {
        device.set_memory_budget(None);
    }
    // Not even a batch of one fits: the user's budget (or device) is too small.
    let report = found.map_err(|e| match (e, budget) {
        (liandan_train::Error::InvalidArgument { what, .. }, Some(_)) => Failure::usage(format!("{what}; raise --budget")),
        (liandan_train::Error::InvalidArgument { what, .. }, None) => Failure::usage(what),
        (e, _) => Failure { code: 1, message: e.to_string() },
    })?;
    text(&describe(&report, a.max))
}

const MIB: f64 = (1u64 << 20) as f64;

/// Bytes in MiB with one decimal (GiB past 10 GiB).
fn size(bytes: u64) -> String {
    let mib = bytes as f64 / MIB;
    if mib >= 10240.0 {
        format!("{:.2} GiB", mib / 1024.0)
    } else {
        format!("{mib:.1} MiB")
    }
}

/// Every trial, then the answer.
fn describe(r: &BatchSizeReport, max: usize) -> String {
    let mut o = String::new();
    for t in &r.trials {
        let verdict = if t.fits { "fits, peak" } else { "does not fit, peak before failing" };
        o.push_str(&format!("batch {:>6}: {verdict} {}\n", t.batch, size(t.peak_bytes)));
    }
    let limit = if r.batch == max && r.trials.iter().all(|t| t.fits) { format!(" (every batch up to --max {max} fits)") } else { String::new() };
    o.push_str(&format!("largest batch: {}{limit}, peak memory {}\n", r.batch, size(r.peak_bytes)));
    o
}

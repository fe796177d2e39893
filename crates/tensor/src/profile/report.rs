//! A [`Profile`]'s tables (by op, by layer) and its Chrome trace (the JSON `chrome://tracing`
//! and Perfetto open).

use std::collections::HashMap;
use std::fmt;
use std::io::Write;
use std::path::Path;

use super::{Event, Profile};
use crate::error::{Error, Result};

/// One row of a table: an op (or a layer) and what its calls cost.
#[derive(Clone, Debug, PartialEq)]
pub struct Row {
    pub name: String,
    /// The inputs' shapes and dtypes, in rows of [`Profile::by_op_and_shapes`].
    pub shapes: Option<String>,
    pub calls: u64,
    /// Host wall time, nanoseconds.
    pub cpu_ns: u64,
    /// Device time of the calls that have one, nanoseconds; `None` where none was measured.
    pub gpu_ns: Option<u64>,
    /// Floating-point operations of the calls, where counted (products and convolutions, in
    /// sessions that record shapes).
    pub flops: Option<u64>,
}

/// One complete event (`"ph": "X"`) of the trace: a kernel-trait call.
#[derive(Clone, Debug, PartialEq)]
pub struct TraceEvent {
    pub name: String,
    pub layer: String,
    pub thread: u64,
    pub start_us: f64,
    pub dur_us: f64,
    pub gpu_us: Option<f64>,
    /// The inputs' shapes and dtypes, when the session recorded them.
    pub shapes: Option<String>,
}

/// Rows of `events` grouped by `key` (a name, and shapes or not), costliest first (by device
/// time where measured).
fn group<'a>(events: impl IntoIterator<Item = &'a Event>, key: impl Fn(&'a Event) -> (&'a str, Option<&'a str>)) -> Vec<Row> {
    let mut rows: HashMap<(&str, Option<&str>), Row> = HashMap::new();
    for e in events {
        let (name, shapes) = key(e);
        let row = rows.entry((name, shapes)).or_insert_with(|| Row {
            name: name.to_string(),
            shapes: shapes.map(str::to_string),
            calls: 0,
            cpu_ns: 0,
            gpu_ns: None,
            flops: None,
        });
        row.calls += 1;
        row.cpu_ns += e.cpu_ns;
        if let Some(g) = e.gpu_ns {
            *row.gpu_ns.get_or_insert(0) += g;
        }
        if let Some(n) = e.flops {
            *row.flops.get_or_insert(0) += n;
        }
    }
    let mut rows: Vec<Row> = rows.into_values().collect();
    rows.sort_by(|a, b| (b.gpu_ns, b.cpu_ns, &a.name, &a.shapes).cmp(&(a.gpu_ns, a.cpu_ns, &b.name, &b.shapes)));
    rows
}

impl Profile {
    /// Calls grouped by op (`matmul`, `add`, `to_host`, `fused lstm_cell`).
    pub fn by_op(&self) -> Vec<Row> {
        group(&self.events, |e| (&e.name, None))
    }

    /// Calls grouped by op and input shapes (`key_averages(group_by_input_shape=True)`), with
    /// the floating-point operations of products and convolutions; empty unless the session
    /// recorded shapes ([`Options::record_shapes`](super::Options::record_shapes)).
    pub fn by_op_and_shapes(&self) -> Vec<Row> {
        group(self.events.iter().filter(|e| e.shapes.is_some()), |e| (&e.name, e.shapes.as_deref()))
    }

    /// Calls grouped by the layer path they ran in (`ResNet/BasicBlock/Conv2d`; `backward` for
    /// the backward pass; empty outside any layer).
    pub fn by_layer(&self) -> Vec<Row> {
        group(&self.events, |e| (if e.layer.is_empty() { "(no layer)" } else { &e.layer }, None))
    }

    /// Every recorded call, in the order they ended.
    pub fn events(&self) -> Vec<TraceEvent> {
        self.events
            .iter()
            .map(|e| TraceEvent {
                name: e.name.to_string(),
                layer: e.layer.clone(),
                thread: e.thread,
                start_us: e.start_ns as f64 / 1e3,
                dur_us: e.cpu_ns as f64 / 1e3,
                gpu_us: e.gpu_ns.map(|g| g as f64 / 1e3),
                shapes: e.shapes.clone(),
            })
            .collect()
    }

    /// The Chrome trace: one complete event per call on its thread's track, its layer and
    /// device time in `args`.
    pub fn trace_json(&self) -> String {
        let events: Vec<serde_json::Value> = self
            .events()
            .into_iter()
            .map(|e| {
                let mut args = serde_json::json!({ "layer": e.layer });
                if let Some(g) = e.gpu_us {
                    args["gpu_us"] = g.into();
                }
                if let Some(s) = e.shapes {
                    args["input_shapes"] = s.into();
                }
                serde_json::json!({ "name": e.name, "cat": "op", "ph": "X", "ts": e.start_us, "dur": e.dur_us, "pid": 1, "tid": e.thread, "args": args })
            })
            .collect();
        serde_json::json!({ "traceEvents": events, "displayTimeUnit": "ms" }).to_string()
    }

    /// Writes [`Profile::trace_json`] to `path` atomically (a temporary file beside it, synced,
    /// then renamed), so a reader never sees half a trace.
    pub fn write_trace(&self, path: &Path) -> Result<()> {
        let fail = |what: &str, e: std::io::Error| Error::Profile(format!("could not {what} {}: {e}", path.display()));
        let name = path.file_name().ok_or_else(|| Error::Profile(format!("{} is not a file path; give one like trace.json", path.display())))?;
        let tmp = path.with_file_name(format!(".{}.tmp-{}", name.to_string_lossy(), std::process::id()));
        let written = (|| {
            let mut file = std::fs::File::create(&tmp)?;
            file.write_all(self.trace_json().as_bytes())?;
            file.sync_all()
        })();
        if let Err(e) = written.and_then(|_| std::fs::rename(&tmp, path)) {
            let _ = std::fs::remove_file(&tmp);
            return Err(fail("write the trace to", e));
        }
        Ok(())
    }
}

fn ms(ns: u64) -> f64 {
    ns as f64 / 1e6
}

fn table(f: &mut fmt::Formatter<'_>, title: &str, rows: &[Row], gpu: bool) -> fmt::Result {
    let total: u64 = rows.iter().map(|r| r.cpu_ns).sum::<u64>().max(1);
    let width = rows.iter().map(|r| r.name.len()).max().unwrap_or(0).max(title.len());
    write!(f, "{title:<width$}  {:>7}  {:>10}  {:>9}  {:>6}", "calls", "total ms", "mean us", "%")?;
    if gpu {
        write!(f, "  {:>8}  {:>11}", "gpu ms", "gpu mean us")?;
    }
    writeln!(f)?;
    for r in rows {
        let mean = r.cpu_ns as f64 / 1e3 / r.calls as f64;
        let share = 100.0 * r.cpu_ns as f64 / total as f64;
        write!(f, "{:<width$}  {:>7}  {:>10.3}  {:>9.1}  {:>6.1}", r.name, r.calls, ms(r.cpu_ns), mean, share)?;
        if let (true, Some(g)) = (gpu, r.gpu_ns) {
            write!(f, "  {:>8.3}  {:>11.1}", ms(g), g as f64 / 1e3 / r.calls as f64)?;
        }
        writeln!(f)?;
    }
    Ok(())
}

/// Rows the printed table by op and input shapes shows (the costliest); every row is in
/// [`Profile::by_op_and_shapes`] and every call's shapes in the trace.
const SHAPE_ROWS: usize = 40;

/// The table by op and input shapes: the rate of counted operations by device time where
/// measured, else by host time (the CPU's kernels run in the call); the shapes last, as they
/// are long.
fn shape_table(f: &mut fmt::Formatter<'_>, rows: &[Row], gpu: bool) -> fmt::Result {
    let width = rows.iter().take(SHAPE_ROWS).map(|r| r.name.len()).max().unwrap_or(0).max(2);
    let time = if gpu { "gpu ms" } else { "total ms" };
    writeln!(f, "{:<width$}  {:>7}  {:>10}  {:>9}  {:>8}  input shapes", "op", "calls", time, "mean us", "TFLOP/s")?;
    for r in rows.iter().take(SHAPE_ROWS) {
        let ns = if gpu { r.gpu_ns.unwrap_or(0) } else { r.cpu_ns };
        let rate = match r.flops {
            // Three decimals, or three digits in exponent form below 0.01 (a small product on
            // a busy CPU would otherwise read 0.000).
            Some(n) if ns > 0 => match n as f64 / ns as f64 / 1e3 {
                r if r >= 0.01 => format!("{r:.3}"),
                r => format!("{r:.2e}"),
            },
            _ => "-".to_string(),
        };
        let shapes = r.shapes.as_deref().unwrap_or("");
        writeln!(f, "{:<width$}  {:>7}  {:>10.3}  {:>9.1}  {rate:>8}  {shapes}", r.name, r.calls, ms(ns), ns as f64 / 1e3 / r.calls as f64)?;
    }
    if rows.len() > SHAPE_ROWS {
        writeln!(f, "... and {} more (op, shapes) pairs (Profile::by_op_and_shapes, or the trace's input_shapes)", rows.len() - SHAPE_ROWS)?;
    }
    Ok(())
}

impl fmt::Display for Profile {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let gpu = if self.gpu_measured { "GPU time measured per kernel" } else { "GPU time not measured" };
        writeln!(f, "{} calls in {:.3} ms wall; host time per call below ({gpu})", self.events.len(), ms(self.wall_ns))?;
        writeln!(f)?;
        table(f, "op", &self.by_op(), self.gpu_measured)?;
        writeln!(f)?;
        table(f, "layer", &self.by_layer(), self.gpu_measured)?;
        let shapes = self.by_op_and_shapes();
        if !shapes.is_empty() {
            writeln!(f)?;
            shape_table(f, &shapes, self.gpu_measured)?;
        }
        for m in &self.memory {
            writeln!(f, "\npeak memory on {}: {:.1} MiB", m.device, m.peak as f64 / (1 << 20) as f64)?;
        }
        for n in &self.notes {
            writeln!(f, "note: {n}")?;
        }
        Ok(())
    }
}

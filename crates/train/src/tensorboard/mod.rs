//! TensorBoard event files (`torch.utils.tensorboard.SummaryWriter`): scalars and histograms
//! that `tensorboard --logdir DIR` plots.
//!
//! [`SummaryWriter`] appends [`proto::Event`] messages (encoded by `prost`) to a file named
//! `events.out.tfevents.<seconds>.<host>.<pid>.<n>`, each in the TFRecord framing of
//! [`record`]; [`read_events`] reads such a file back. `Trainer::fit` writes one when
//! [`FitConfig::tensorboard`](crate::trainer::FitConfig::tensorboard) is set.
//!
//! ```
//! use liandan_train::tensorboard::{read_events, scalars, SummaryWriter};
//! # fn main() -> liandan_train::Result<()> {
//! let dir = std::env::temp_dir().join(format!("tb-doc-{}", std::process::id()));
//! let mut tb = SummaryWriter::new(&dir)?;
//! for step in 1..=3 {
//!     tb.add_scalar("train/loss", 1.0 / step as f64, step)?;
//! }
//! tb.add_histogram("fc.weight", &[-0.5, 0.0, 0.25, 0.5], 3)?;
//! tb.flush()?;
//! let loss: Vec<(u64, f32)> = scalars(&read_events(tb.path())?, "train/loss");
//! assert_eq!(loss, [(1, 1.0), (2, 0.5), (3, 1.0 / 3.0)]);
//! # std::fs::remove_dir_all(&dir).ok();
//! # Ok(())
//! # }
//! ```

pub mod proto;
pub mod record;

use std::fs::{File, OpenOptions};
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

use prost::Message;

use crate::error::{Error, Result};
use proto::summary::value::Kind;
use proto::{event, summary, Event, HistogramProto, Summary};

/// Buckets of a histogram: TensorBoard redraws them into its own, so a few dozen suffice.
const BUCKETS: usize = 30;

/// Tells apart the files one process opens in one second.
static OPENED: AtomicU64 = AtomicU64::new(0);

/// Writes a TensorBoard event file. Events are buffered; [`SummaryWriter::flush`] (and dropping
/// the writer) pushes them to the file, where TensorBoard picks them up.
pub struct SummaryWriter {
    out: BufWriter<File>,
    path: PathBuf,
    /// Every event's wall time, when fixed (for files that must come out the same every time).
    wall_time: Option<f64>,
    /// Whether the file-version event that opens every file is written yet.
    started: bool,
}

impl SummaryWriter {
    /// A new event file in `dir` (created when missing), named as TensorFlow and PyTorch name
    /// theirs so that TensorBoard finds it.
    pub fn new(dir: impl AsRef<Path>) -> Result<SummaryWriter> {
        let dir = dir.as_ref();
        std::fs::create_dir_all(dir).map_err(|source| Error::Io { path: dir.into(), action: "create the TensorBoard directory", source })?;
        let secs = SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs());
        let host = std::env::var("HOSTNAME").ok().filter(|h| !h.is_empty() && !h.contains(['/', '\\'])).unwrap_or_else(|| "localhost".into());
        let name = format!("events.out.tfevents.{secs}.{host}.{}.{}", std::process::id(), OPENED.fetch_add(1, Ordering::Relaxed));
        SummaryWriter::create(dir.join(name))
    }

    /// A new event file at `path`; an existing file is never overwritten (that is an error).
    pub fn create(path: impl AsRef<Path>) -> Result<SummaryWriter> {
        let path = path.as_ref().to_path_buf();
        let file = OpenOptions::new().write(true).create_new(true).open(&path).map_err(|source| Error::Io {
            path: path.clone(),
            action: "create the TensorBoard event file",
            source,
        })?;
        Ok(SummaryWriter { out: BufWriter::new(file), path, wall_time: None, started: false })
    }

    /// Stamps every event with `seconds` instead of the clock, so that the same calls write the
    /// same bytes (tests compare files).
    pub fn with_fixed_wall_time(mut self, seconds: f64) -> SummaryWriter {
        self.wall_time = Some(seconds);
        self
    }

    /// The event file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// `value` under `tag` at `step` (`add_scalar`). Tags with a `/` group into sections
    /// (`train/loss`, `val/acc`).
    pub fn add_scalar(&mut self, tag: &str, value: f64, step: u64) -> Result<()> {
        self.add_scalars(&[(tag, value)], step)
    }

    /// Several scalars of one step in one event.
    pub fn add_scalars(&mut self, values: &[(&str, f64)], step: u64) -> Result<()> {
        let value = values.iter().map(|(tag, v)| summary::Value { tag: tag.to_string(), kind: Some(Kind::SimpleValue(*v as f32)) }).collect();
        self.write(step, event::What::Summary(Summary { value }))
    }

    /// The distribution of `values` under `tag` at `step` (`add_histogram`): min, max, count,
    /// sum, sum of squares and equal-width buckets between min and max. Non-finite values are
    /// left out; with none left nothing is written.
    pub fn add_histogram(&mut self, tag: &str, values: &[f64], step: u64) -> Result<()> {
        let Some(histo) = histogram(values) else { return Ok(()) };
        let value = vec![summary::Value { tag: tag.to_string(), kind: Some(Kind::Histo(histo)) }];
        self.write(step, event::What::Summary(Summary { value }))
    }

    /// Pushes the buffered events to the file.
    pub fn flush(&mut self) -> Result<()> {
        self.start()?;
        self.out.flush().map_err(|source| self.io(source))
    }

    fn write(&mut self, step: u64, what: event::What) -> Result<()> {
        self.start()?;
        self.record(step, what)
    }

    /// The file-version event every event file opens with.
    fn start(&mut self) -> Result<()> {
        if !self.started {
            self.started = true;
            self.record(0, event::What::FileVersion("brain.Event:2".into()))?;
        }
        Ok(())
    }

    fn record(&mut self, step: u64, what: event::What) -> Result<()> {
        let wall_time = self.wall_time.unwrap_or_else(|| SystemTime::now().duration_since(UNIX_EPOCH).map_or(0.0, |d| d.as_secs_f64()));
        let event = Event { wall_time, step: step.min(i64::MAX as u64) as i64, what: Some(what) };
        record::write_record(&mut self.out, &event.encode_to_vec()).map_err(|source| self.io(source))
    }

    fn io(&self, source: std::io::Error) -> Error {
        Error::Io { path: self.path.clone(), action: "write the TensorBoard event file", source }
    }
}

impl Drop for SummaryWriter {
    fn drop(&mut self) {
        // Errors have no one to go to here; `flush` reports them to a caller that asks.
        let _ = self.flush();
    }
}

/// The histogram of the finite `values`, `None` when there are none.
fn histogram(values: &[f64]) -> Option<HistogramProto> {
    let finite: Vec<f64> = values.iter().copied().filter(|v| v.is_finite()).collect();
    let (min, max) = finite.iter().fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), &v| (lo.min(v), hi.max(v)));
    if finite.is_empty() {
        return None;
    }
    let buckets = if max > min { BUCKETS } else { 1 };
    let width = (max - min) / buckets as f64;
    // Right edges; the last is exactly `max`, so every value lands in a bucket.
    let bucket_limit: Vec<f64> = (1..=buckets).map(|i| if i == buckets { max } else { min + width * i as f64 }).collect();
    let mut bucket = vec![0.0; buckets];
    for &v in &finite {
        let i = if width > 0.0 { (((v - min) / width).ceil() as usize).saturating_sub(1).min(buckets - 1) } else { 0 };
        bucket[i] += 1.0;
    }
    Some(HistogramProto { min, max, num: finite.len() as f64, sum: finite.iter().sum(), sum_squares: finite.iter().map(|v| v * v).sum(), bucket_limit, bucket })
}

/// Every event of the file at `path`, in order, each record's CRCs checked. A last record cut
/// short (the writer is still writing) is left out.
pub fn read_events(path: impl AsRef<Path>) -> Result<Vec<Event>> {
    let path = path.as_ref();
    let bytes = std::fs::read(path).map_err(|source| Error::Io { path: path.into(), action: "read the event file", source })?;
    let bad = |detail: String| Error::Data { path: path.into(), detail };
    record::read_records(&bytes)
        .map_err(bad)?
        .into_iter()
        .enumerate()
        .map(|(i, r)| Event::decode(r).map_err(|e| bad(format!("record {i} is not a TensorBoard event ({e})"))))
        .collect()
}

/// The `(step, value)` pairs of scalar `tag` among `events`, in order.
pub fn scalars(events: &[Event], tag: &str) -> Vec<(u64, f32)> {
    summary_values(events)
        .filter_map(|(step, v)| match &v.kind {
            Some(Kind::SimpleValue(x)) if v.tag == tag => Some((step, *x)),
            _ => None,
        })
        .collect()
}

/// The `(step, histogram)` pairs of histogram `tag` among `events`, in order.
pub fn histograms<'a>(events: &'a [Event], tag: &str) -> Vec<(u64, &'a HistogramProto)> {
    summary_values(events)
        .filter_map(|(step, v)| match &v.kind {
            Some(Kind::Histo(h)) if v.tag == tag => Some((step, h)),
            _ => None,
        })
        .collect()
}

/// Every tag among `events`, in order of first appearance.
pub fn tags(events: &[Event]) -> Vec<String> {
    let mut tags: Vec<String> = Vec::new();
    for (_, v) in summary_values(events) {
        if !tags.contains(&v.tag) {
            tags.push(v.tag.clone());
        }
    }
    tags
}

fn summary_values(events: &[Event]) -> impl Iterator<Item = (u64, &summary::Value)> {
    events.iter().flat_map(|e| match &e.what {
        Some(event::What::Summary(s)) => s.value.iter().map(|v| (e.step.max(0) as u64, v)).collect::<Vec<_>>(),
        _ => Vec::new(),
    })
}

//! Metrics that accumulate on the device and are read back only when asked.
//!
//! [`Metric::update`] runs once per step and queues a few small ops (no read-back);
//! [`Metric::compute`] reads the running value back once, at the log interval or the end of an
//! epoch. A read-back drains the device's queue, which costs far more on a GPU than the ops.

use liandan_tensor::{DType, Tensor};

use crate::error::{Error, Result};

/// A quantity computed over the batches of an epoch (`torchmetrics`' `update` / `compute` /
/// `reset`).
pub trait Metric: Send {
    /// The history column name (`acc`, `top5`); validation values get the prefix `val_`.
    fn name(&self) -> String;

    /// Adds one batch: the model's `output` and the `target`, both on the device. Must not
    /// read anything back to the host.
    fn update(&mut self, output: &Tensor, target: &Tensor) -> Result<()>;

    /// The value over every batch since the last reset (one read-back). NaN before any batch.
    fn compute(&self) -> Result<f64>;

    /// Forgets every batch.
    fn reset(&mut self);

    /// The running state as numbers, so a run interrupted mid-epoch resumes with the same
    /// epoch value. Metrics that leave this empty restart their count on resume.
    fn state(&self) -> Result<Vec<f64>> {
        Ok(Vec::new())
    }

    /// Restores what [`Metric::state`] returned.
    fn load_state(&mut self, state: &[f64]) -> Result<()> {
        let _ = state;
        Ok(())
    }
}

/// A count of correct predictions kept on the device, plus a count restored from a checkpoint
/// (on the host), and the number of samples seen (known on the host without a read-back).
#[derive(Default)]
struct Counter {
    correct: Option<Tensor>,
    restored: f64,
    samples: usize,
}

impl Counter {
    fn add(&mut self, correct: Tensor, samples: usize) -> Result<()> {
        self.correct = Some(match self.correct.take() {
            Some(c) => c.add(&correct)?,
            None => correct,
        });
        self.samples += samples;
        Ok(())
    }

    fn correct(&self) -> Result<f64> {
        Ok(self.restored + if let Some(c) = &self.correct { c.item_f64()? } else { 0.0 })
    }

    fn fraction(&self) -> Result<f64> {
        if self.samples == 0 {
            return Ok(f64::NAN);
        }
        Ok(self.correct()? / self.samples as f64)
    }

    fn state(&self) -> Result<Vec<f64>> {
        Ok(vec![self.correct()?, self.samples as f64])
    }

    fn load_state(&mut self, state: &[f64], name: &str) -> Result<()> {
        let [correct, samples] = state else {
            return Err(Error::State { op: "metric", detail: format!("`{name}` expects 2 numbers of saved state, found {}", state.len()) });
        };
        *self = Counter { correct: None, restored: *correct, samples: *samples as usize };
        Ok(())
    }
}

/// A metric that is the fraction of samples counted as hits on the device (accuracy, top-k):
/// the [`Metric`] around its [`Counter`] is the same for each.
trait CountsHits: Send {
    /// [`Metric::name`].
    fn name(&self) -> String;

    /// One batch's hits (a scalar on the device) and its sample count.
    fn hits(&self, output: &Tensor, target: &Tensor) -> Result<(Tensor, usize)>;

    fn counter(&mut self) -> &mut Counter;

    fn counted(&self) -> &Counter;
}

impl<M: CountsHits> Metric for M {
    fn name(&self) -> String {
        CountsHits::name(self)
    }

    fn update(&mut self, output: &Tensor, target: &Tensor) -> Result<()> {
        let (hits, n) = self.hits(output, target)?;
        self.counter().add(hits, n)
    }

    fn compute(&self) -> Result<f64> {
        self.counted().fraction()
    }

    fn reset(&mut self) {
        *self.counter() = Counter::default();
    }

    fn state(&self) -> Result<Vec<f64>> {
        self.counted().state()
    }

    fn load_state(&mut self, state: &[f64]) -> Result<()> {
        let name = CountsHits::name(self);
        self.counter().load_state(state, &name)
    }
}

/// Checks that `output` is `[N, classes]` and `target` is `[N]`.
fn check_classes(op: &'static str, output: &Tensor, target: &Tensor) -> Result<usize> {
    match (output.shape(), target.shape()) {
        ([n, _], [m]) if n == m => Ok(*n),
        (o, t) => Err(Error::InvalidArgument { op, what: format!("expects outputs [N, classes] and targets [N], got {o:?} and {t:?}") }),
    }
}

/// Top-1 accuracy of class scores `[N, classes]` against labels `[N]` (`acc`).
#[derive(Default)]
pub struct Accuracy {
    counter: Counter,
}

impl Accuracy {
    pub fn new() -> Accuracy {
        Accuracy::default()
    }
}

impl CountsHits for Accuracy {
    fn name(&self) -> String {
        "acc".into()
    }

    fn hits(&self, output: &Tensor, target: &Tensor) -> Result<(Tensor, usize)> {
        let n = check_classes("accuracy", output, target)?;
        Ok((output.argmax(1usize, false)?.eq(target)?.to_dtype(DType::F32)?.sum_all()?, n))
    }

    fn counter(&mut self) -> &mut Counter {
        &mut self.counter
    }

    fn counted(&self) -> &Counter {
        &self.counter
    }
}

/// Top-k accuracy (`top5` for k = 5): the label is among the `k` highest scores. Ties count
/// in the label's favour, as a sort that keeps the label first among equals would.
pub struct TopK {
    k: usize,
    counter: Counter,
}

impl TopK {
    pub fn new(k: usize) -> TopK {
        TopK { k, counter: Counter::default() }
    }
}

impl CountsHits for TopK {
    fn name(&self) -> String {
        format!("top{}", self.k)
    }

    fn hits(&self, output: &Tensor, target: &Tensor) -> Result<(Tensor, usize)> {
        let n = check_classes("top-k accuracy", output, target)?;
        // The label's rank is the number of classes scored strictly higher; there is no
        // top-k kernel, and this needs only a gather, a compare and two sums.
        let label_score = output.gather(1usize, &target.unsqueeze(1usize)?)?;
        let rank = output.gt(&label_score)?.to_dtype(DType::F32)?.sum(&[1], false)?;
        Ok((rank.lt_scalar(self.k as f64)?.to_dtype(DType::F32)?.sum_all()?, n))
    }

    fn counter(&mut self) -> &mut Counter {
        &mut self.counter
    }

    fn counted(&self) -> &Counter {
        &self.counter
    }
}

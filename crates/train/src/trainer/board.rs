//! What [`Trainer::fit`](super::Trainer::fit) writes for TensorBoard (see
//! [`TensorBoardConfig`](super::TensorBoardConfig)): scalars at each read-back and each
//! epoch's end, and histograms of the weights.

use liandan_nn::Tensor;

use super::config::FitConfig;
use crate::error::Result;

/// The open event file of one `fit`.
pub(crate) struct Board {
    #[cfg(feature = "tensorboard")]
    writer: crate::tensorboard::SummaryWriter,
    #[cfg(feature = "tensorboard")]
    histograms: bool,
}

impl Board {
    /// A new event file when `config` asks for one.
    pub(crate) fn open(config: &FitConfig) -> Result<Option<Board>> {
        let Some(tb) = &config.tensorboard else { return Ok(None) };
        #[cfg(feature = "tensorboard")]
        return Ok(Some(Board { writer: crate::tensorboard::SummaryWriter::new(&tb.dir)?, histograms: tb.histograms }));
        #[cfg(not(feature = "tensorboard"))]
        {
            let _ = tb;
            Err(crate::Error::InvalidArgument { op: "fit", what: "tensorboard: liandan-train was built without its `tensorboard` feature; enable it".into() })
        }
    }

    /// A read-back's scalars: the loss of each step (`losses[i]` is step `first_step + i + 1`,
    /// left out where the loss scaler skipped it), then at the interval's last step the
    /// running training metrics (`values` after the loss), the learning rate and the speed.
    pub(crate) fn interval(
        &mut self,
        first_step: u64,
        losses: &[f64],
        skipped: &[bool],
        values: &[(String, f64)],
        lr: f64,
        samples_per_sec: f64,
    ) -> Result<()> {
        #[cfg(feature = "tensorboard")]
        {
            for (i, (&loss, &skip)) in losses.iter().zip(skipped).enumerate() {
                if !skip {
                    self.writer.add_scalar("train/loss", loss, first_step + i as u64 + 1)?;
                }
            }
            let tags: Vec<String> = values.iter().skip(1).map(|(name, _)| format!("train/{name}")).collect();
            let mut scalars: Vec<(&str, f64)> = tags.iter().map(String::as_str).zip(values.iter().skip(1).map(|(_, v)| *v)).collect();
            scalars.extend([("train/lr", lr), ("train/samples_per_sec", samples_per_sec)]);
            self.writer.add_scalars(&scalars, first_step + losses.len() as u64)?;
            self.writer.flush()
        }
        #[cfg(not(feature = "tensorboard"))]
        {
            let _ = (first_step, losses, skipped, values, lr, samples_per_sec);
            Ok(())
        }
    }

    /// An epoch's end at `step`: the validation columns of its history row as `val/<name>`,
    /// and the histograms of `params` when asked for.
    pub(crate) fn epoch(&mut self, step: u64, row: &[(String, f64)], params: &[(String, Tensor)]) -> Result<()> {
        #[cfg(feature = "tensorboard")]
        {
            let tags: Vec<(String, f64)> = row.iter().filter_map(|(n, v)| n.strip_prefix("val_").map(|n| (format!("val/{n}"), *v))).collect();
            if !tags.is_empty() {
                self.writer.add_scalars(&tags.iter().map(|(t, v)| (t.as_str(), *v)).collect::<Vec<_>>(), step)?;
            }
            if self.histograms {
                for (name, t) in params {
                    self.writer.add_histogram(&format!("weights/{name}"), &t.to_vec_f64()?, step)?;
                }
            }
            self.writer.flush()
        }
        #[cfg(not(feature = "tensorboard"))]
        {
            let _ = (step, row, params);
            Ok(())
        }
    }

    /// Whether the epoch's parameters are wanted (they are read back from the device).
    pub(crate) fn wants_params(&self) -> bool {
        #[cfg(feature = "tensorboard")]
        return self.histograms;
        #[cfg(not(feature = "tensorboard"))]
        false
    }
}

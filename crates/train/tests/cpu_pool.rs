//! `Trainer::fit` on the CPU runs its epochs on a thread of the kernels' pool (two threads
//! here), callbacks included, and returns to the caller's thread.

use std::sync::{Arc, Mutex};

use liandan_train::data::{DataLoader, Dataset, Sample};
use liandan_train::nn::layers::{LinearConfig, ReLU, Sequential};
use liandan_train::nn::{Device, ModuleExt, Reduction};
use liandan_train::optim::{Sgd, SgdConfig};
use liandan_train::trainer::{Callback, FitConfig, ProgressStyle};
use liandan_train::{Result, Trainer};

/// Points in 4 dimensions, labelled by the sign of their first coordinate.
struct Signs;

impl Dataset for Signs {
    fn len(&self) -> usize {
        32
    }

    fn get(&self, index: usize) -> Result<Sample> {
        let input: Vec<f32> = (0..4).map(|j| ((index * 5 + j * 3) % 7) as f32 - 3.0).collect();
        Ok(Sample { target: (input[0] > 0.0) as i64, input, shape: vec![4] })
    }
}

/// The pool thread each epoch started on, if any.
#[derive(Clone, Default)]
struct Threads(Arc<Mutex<Vec<Option<usize>>>>);

impl Callback for Threads {
    fn on_epoch_start(&mut self, _: usize) -> Result<()> {
        self.0.lock().unwrap().push(rayon::current_thread_index());
        Ok(())
    }
}

#[test]
fn fit_on_the_cpu_runs_its_epochs_on_the_kernels_pool() {
    rayon::ThreadPoolBuilder::new().num_threads(2).build_global().unwrap();
    let dev = Device::cpu();
    let model = Sequential::new().push(LinearConfig::new(4, 8).init(&dev).unwrap()).push(ReLU).push(LinearConfig::new(8, 2).init(&dev).unwrap());
    let opt = Sgd::new(model.named_parameters(), SgdConfig { lr: 0.1, ..Default::default() }).unwrap();
    let threads = Threads::default();
    let mut t = Trainer::new(model, |out, y| Ok(out.cross_entropy(y, Reduction::Mean)?), opt).with_callback(threads.clone());
    let mut config = FitConfig::new(2);
    config.progress = ProgressStyle::Quiet;
    config.monitor = "loss".into();
    let history = t.fit(&DataLoader::new(Signs, 8, &dev).unwrap(), None, &config).unwrap();
    assert_eq!(history.len(), 2);
    let seen = threads.0.lock().unwrap().clone();
    assert_eq!(seen.len(), 2);
    assert!(seen.iter().all(Option::is_some), "epochs ran outside the pool: {seen:?}");
    assert_eq!(rayon::current_thread_index(), None);
}

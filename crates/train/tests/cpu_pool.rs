//! `Trainer::fit` and `Trainer::evaluate` on the CPU run on a thread of the kernels' pool (two
//! threads here), callbacks and metrics included, and return to the caller's thread.

use std::sync::{Arc, Mutex};

use liandan_train::data::{DataLoader, Dataset, Sample};
use liandan_train::nn::layers::{LinearConfig, ReLU, Sequential};
use liandan_train::nn::{Device, ModuleExt, Reduction, Tensor};
use liandan_train::optim::{Sgd, SgdConfig};
use liandan_train::trainer::{Callback, FitConfig, Metric, ProgressStyle};
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

/// A metric of nothing that records the pool thread each batch was measured on.
#[derive(Clone, Default)]
struct BatchThreads(Arc<Mutex<Vec<Option<usize>>>>);

impl Metric for BatchThreads {
    fn name(&self) -> String {
        "threads".into()
    }

    fn update(&mut self, _: &Tensor, _: &Tensor) -> Result<()> {
        self.0.lock().unwrap().push(rayon::current_thread_index());
        Ok(())
    }

    fn compute(&self) -> Result<f64> {
        Ok(0.0)
    }

    fn reset(&mut self) {}
}

#[test]
fn fit_and_evaluate_on_the_cpu_run_on_the_kernels_pool() {
    rayon::ThreadPoolBuilder::new().num_threads(2).build_global().unwrap();
    let dev = Device::cpu();
    let model = Sequential::new().push(LinearConfig::new(4, 8).init(&dev).unwrap()).push(ReLU).push(LinearConfig::new(8, 2).init(&dev).unwrap());
    let opt = Sgd::new(model.named_parameters(), SgdConfig { lr: 0.1, ..Default::default() }).unwrap();
    let threads = Threads::default();
    let batches = BatchThreads::default();
    let mut t = Trainer::new(model, |out, y| Ok(out.cross_entropy(y, Reduction::Mean)?), opt).with_callback(threads.clone()).with_metric(batches.clone());
    let mut config = FitConfig::new(2);
    config.progress = ProgressStyle::Quiet;
    config.monitor = "loss".into();
    let history = t.fit(&DataLoader::new(Signs, 8, &dev).unwrap(), None, &config).unwrap();
    assert_eq!(history.len(), 2);
    let seen = threads.0.lock().unwrap().clone();
    assert_eq!(seen.len(), 2);
    assert!(seen.iter().all(Option::is_some), "epochs ran outside the pool: {seen:?}");
    assert_eq!(rayon::current_thread_index(), None);

    batches.0.lock().unwrap().clear();
    t.evaluate(&DataLoader::new(Signs, 8, &dev).unwrap()).unwrap();
    let seen = batches.0.lock().unwrap().clone();
    assert_eq!(seen.len(), 4);
    assert!(seen.iter().all(Option::is_some), "evaluation ran outside the pool: {seen:?}");
}

//! Data-parallel training with ranks as threads of one process (a `Communicator` over shared
//! memory stands in for MPI): N ranks at batch B train as one at batch N·B, gradients are
//! averaged bucket by bucket, accumulation steps skip the all-reduce, and ranks that disagree
//! get an error naming the difference. `mpirun` itself is tested by the CLI's `distributed`
//! tests (feature `mpi`).

mod common;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Barrier, Mutex};

use liandan_backend_cpu as _;
use liandan_train::data::{DataLoader, Dataset, Sample};
use liandan_train::distributed::{Communicator, Distributed, Reducer};
use liandan_train::nn::layers::{LinearConfig, ReLU, Sequential};
use liandan_train::nn::{manual_seed, DType, Device, ModuleExt, Reduction, Tensor};
use liandan_train::optim::{Sgd, SgdConfig};
use liandan_train::trainer::{Accuracy, FitConfig, ProgressStyle};
use liandan_train::{Result, Trainer};

/// One channel of collectives between the threads of a group.
struct Channel {
    barrier: Barrier,
    slots: Mutex<Vec<Vec<u8>>>,
}

/// Rank `rank` of a group of threads; `duplicate` hands out the group's next channel.
struct Threads {
    rank: usize,
    channels: Arc<Vec<Channel>>,
    channel: usize,
    used: Arc<AtomicUsize>,
}

impl Threads {
    /// `size` ranks sharing a few channels.
    fn group(size: usize) -> Vec<Threads> {
        let channels = Arc::new((0..8).map(|_| Channel { barrier: Barrier::new(size), slots: Mutex::new(vec![Vec::new(); size]) }).collect::<Vec<_>>());
        (0..size).map(|rank| Threads { rank, channels: channels.clone(), channel: 0, used: Arc::new(AtomicUsize::new(0)) }).collect()
    }

    fn me(&self) -> &Channel {
        &self.channels[self.channel]
    }

    /// Every rank's `values` summed, in rank order, into each rank's `values`.
    fn all_reduce<T: bytemuck::Pod + Default + std::ops::AddAssign>(&self, values: &mut [T]) {
        let all = self.all_gather(bytemuck::cast_slice(values));
        values.fill(T::default());
        for theirs in all {
            let theirs: Vec<T> = bytemuck::pod_collect_to_vec(&theirs);
            values.iter_mut().zip(theirs).for_each(|(v, t)| *v += t);
        }
    }
}

impl Communicator for Threads {
    fn rank(&self) -> usize {
        self.rank
    }

    fn size(&self) -> usize {
        self.me().slots.lock().unwrap().len()
    }

    fn all_reduce_f32(&self, values: &mut [f32]) {
        self.all_reduce(values)
    }

    fn all_reduce_f64(&self, values: &mut [f64]) {
        self.all_reduce(values)
    }

    fn broadcast(&self, bytes: &mut [u8], root: usize) {
        let all = self.all_gather(bytes);
        bytes.copy_from_slice(&all[root]);
    }

    fn all_gather(&self, mine: &[u8]) -> Vec<Vec<u8>> {
        self.me().slots.lock().unwrap()[self.rank] = mine.to_vec();
        self.me().barrier.wait();
        let all = self.me().slots.lock().unwrap().clone();
        self.me().barrier.wait();
        all
    }

    fn barrier(&self) {
        self.me().barrier.wait();
    }

    fn duplicate(&self) -> Box<dyn Communicator> {
        let channel = self.used.fetch_add(1, Ordering::SeqCst) + 1;
        Box::new(Threads { rank: self.rank, channels: self.channels.clone(), channel, used: self.used.clone() })
    }

    fn abort(&self, code: i32) -> ! {
        panic!("rank {} aborted the job with status {code}", self.rank)
    }
}

/// Runs `f` on `n` thread ranks and returns what each returned, in rank order.
fn ranks<T: Send>(n: usize, bucket_bytes: usize, f: impl Fn(Distributed) -> T + Sync) -> Vec<T> {
    std::thread::scope(|s| {
        let handles: Vec<_> =
            Threads::group(n).into_iter().map(|t| s.spawn(|| f(Distributed::new(Arc::new(t), 0, 1).with_bucket_bytes(bucket_bytes)))).collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    })
}

/// Ten classes of points in 16 dimensions, from a fixed formula.
struct Points(usize);

impl Dataset for Points {
    fn len(&self) -> usize {
        self.0
    }

    fn get(&self, index: usize) -> Result<Sample> {
        let input: Vec<f32> = (0..16).map(|j| (((index * 31 + j * 17) % 23) as f32 / 11.5) - 1.0).collect();
        Ok(Sample { input, shape: vec![16], target: (index % 10) as i64 })
    }
}

/// A small MLP without dropout or BatchNorm (so that N ranks can equal one), `width` wide,
/// always the same initial weights.
fn mlp(dev: &Device, width: usize) -> Sequential {
    // The generator is global to the process: one model is built at a time.
    static BUILD: Mutex<()> = Mutex::new(());
    let _one = BUILD.lock().unwrap();
    manual_seed(7);
    Sequential::new().push(LinearConfig::new(16, width).init(dev).unwrap()).push(ReLU).push(LinearConfig::new(width, 10).init(dev).unwrap())
}

/// The model's parameters after `steps` SGD steps at batch `batch` (per rank) with
/// `accumulate` batches per step, on rank `dist` of a job or alone.
fn train(dist: Option<Distributed>, batch: usize, accumulate: usize, steps: usize) -> Vec<Vec<f32>> {
    let dev = Device::cpu();
    let model = mlp(&dev, 64);
    let opt = Sgd::new(model.named_parameters(), SgdConfig { lr: 0.1, momentum: 0.9, ..SgdConfig::default() }).unwrap();
    let mut trainer = Trainer::new(model, |out, y| Ok(out.cross_entropy(y, Reduction::Mean)?), opt).with_metric(Accuracy::new());
    if let Some(d) = dist {
        trainer = trainer.with_distributed(d);
    }
    let data = DataLoader::new(Points(200), batch, &dev).unwrap().shuffle(5);
    let val = DataLoader::new(Points(37), 10, &dev).unwrap();
    let mut config = FitConfig::new(1);
    config.limit_batches = Some(steps * accumulate);
    config.accumulate = accumulate;
    config.progress = ProgressStyle::Quiet;
    let history = trainer.fit(&data, Some(&val), &config).unwrap();
    assert!(history.last("val_acc").is_some_and(f64::is_finite));
    trainer.model().parameters().iter().map(|p| p.to_vec::<f32>().unwrap()).collect()
}

fn assert_close(got: &[Vec<f32>], want: &[Vec<f32>], what: &str) {
    for (g, w) in got.iter().flatten().zip(want.iter().flatten()) {
        assert!((g - w).abs() <= 1e-5, "{what}: {g} against {w}");
    }
}

#[test]
fn two_ranks_at_batch_b_train_as_one_rank_at_batch_2b() {
    let alone = train(None, 16, 1, 10);
    // Small buckets: several all-reduces per step, sent as backward finishes them.
    for params in ranks(2, 4096, |d| train(Some(d), 8, 1, 10)) {
        assert_close(&params, &alone, "2 ranks x 8 against 1 x 16");
    }
    // With accumulation: 2 ranks x 2 batches x 4 per step, the all-reduce on the second only.
    for params in ranks(2, 1 << 20, |d| train(Some(d), 4, 2, 10)) {
        assert_close(&params, &alone, "2 ranks x 2 x 4 against 1 x 16");
    }
}

#[test]
fn the_reducer_averages_gradients_and_leaves_unused_parameters_without_one() {
    let got = ranks(2, 4, |d| {
        let dev = Device::cpu();
        let r = d.rank() as f64;
        let a = Tensor::zeros(&[40], DType::F32, &dev).unwrap().requires_grad_(true).unwrap();
        let b = Tensor::zeros(&[3, 5], DType::F32, &dev).unwrap().requires_grad_(true).unwrap();
        let unused = Tensor::zeros(&[2], DType::F32, &dev).unwrap().requires_grad_(true).unwrap();
        let mut reducer = Reducer::new(&d, &[a.clone(), b.clone(), unused.clone()]).unwrap();
        // Rank r's loss: (r + 1) * sum(a) + (r + 2) * sum(b); two steps, the first accumulating.
        for sync in [false, true] {
            reducer.set_sync(sync);
            let loss = a.sum_all().unwrap().mul_scalar(r + 1.0).unwrap().add(&b.sum_all().unwrap().mul_scalar(r + 2.0).unwrap()).unwrap();
            loss.backward().unwrap();
        }
        reducer.finish().unwrap();
        let stats = reducer.take_stats();
        assert_eq!((stats.steps, stats.buckets), (1, 3));
        (a.grad().unwrap().to_vec::<f32>().unwrap(), b.grad().unwrap().to_vec::<f32>().unwrap(), unused.grad().is_none())
    });
    for (a, b, unused_has_none) in got {
        // Two accumulated backwards per rank, averaged over ranks: 2 * (1 + 2) / 2 and 2 * (2 + 3) / 2.
        assert!(a.iter().all(|&g| g == 3.0), "{a:?}");
        assert!(b.iter().all(|&g| g == 5.0), "{b:?}");
        assert!(unused_has_none);
    }
}

#[test]
fn a_bucket_of_mixed_dtypes_and_shapes_comes_back_as_each_parameters_mean_gradient() {
    // (shape, dtype, ranks that use it): a 0-d one, halves, one only rank 0 uses, one unused.
    let specs: [(&[usize], DType, &[usize]); 6] = [
        (&[3, 5], DType::F32, &[0, 1]),
        (&[4], DType::F16, &[0, 1]),
        (&[2, 3], DType::BF16, &[0, 1]),
        (&[], DType::F32, &[0, 1]),
        (&[7], DType::F32, &[0]),
        (&[2], DType::F32, &[]),
    ];
    // Rank r's gradient of parameter i: seeded multiples of 1/64 in [-1, 1], which bf16 holds
    // exactly, and so the sum of two and its half.
    let grad = |i: usize, r: usize, n: usize| -> Vec<f64> { common::values(n, (10 * i + r + 1) as u64).iter().map(|v| (v * 64.0).round() / 64.0).collect() };
    for dev in common::devices() {
        // One bucket for them all, then one a parameter.
        for bucket_bytes in [1 << 20, 4] {
            let got = ranks(2, bucket_bytes, |d| {
                let params: Vec<Tensor> =
                    specs.iter().map(|&(shape, dtype, _)| Tensor::zeros(shape, dtype, &dev).unwrap().requires_grad_(true).unwrap()).collect();
                let mut reducer = Reducer::new(&d, &params).unwrap();
                reducer.set_sync(true);
                let mut loss = Tensor::zeros(&[], DType::F32, &dev).unwrap();
                for (i, (p, &(shape, dtype, users))) in params.iter().zip(&specs).enumerate() {
                    if users.contains(&d.rank()) {
                        let k = Tensor::from_f64s(&grad(i, d.rank(), p.numel()), shape, dtype, &dev).unwrap();
                        loss = loss.add(&p.mul(&k).unwrap().sum_all().unwrap().to_dtype(DType::F32).unwrap()).unwrap();
                    }
                }
                loss.backward().unwrap();
                reducer.finish().unwrap();
                params
                    .iter()
                    .map(|p| {
                        p.grad().map(|g| {
                            assert_eq!((g.shape(), g.dtype()), (p.shape(), p.dtype()));
                            // A buffer of its own, as the optimizers' multi-tensor kernels take it.
                            assert!(g.is_contiguous() && g.layout().offset() == 0, "{:?}", g.layout());
                            g.to_vec_f64().unwrap()
                        })
                    })
                    .collect::<Vec<_>>()
            });
            for (r, grads) in got.iter().enumerate() {
                for (i, (g, &(shape, _, users))) in grads.iter().zip(&specs).enumerate() {
                    let n = shape.iter().product();
                    let want = (!users.is_empty()).then(|| {
                        let sum = users.iter().map(|&u| grad(i, u, n)).fold(vec![0.0; n], |s, g| s.iter().zip(g).map(|(a, b)| a + b).collect());
                        sum.iter().map(|v| v / 2.0).collect::<Vec<f64>>()
                    });
                    assert_eq!(g, &want, "{dev}, buckets of {bucket_bytes} bytes, rank {r}, parameter {i} {shape:?}");
                }
            }
        }
    }
}

#[test]
fn ranks_that_disagree_get_the_first_difference_not_a_hang() {
    let errors = ranks(2, 1 << 20, |d| {
        let dev = Device::cpu();
        let model = mlp(&dev, if d.rank() == 0 { 64 } else { 32 });
        let opt = Sgd::new(model.named_parameters(), SgdConfig { lr: 0.1, ..SgdConfig::default() }).unwrap();
        let mut trainer = Trainer::new(model, |out, y| Ok(out.cross_entropy(y, Reduction::Mean)?), opt).with_distributed(d);
        let data = DataLoader::new(Points(64), 8, &dev).unwrap();
        let mut config = FitConfig::new(1);
        config.progress = ProgressStyle::Quiet;
        config.monitor = "loss".into();
        trainer.fit(&data, None, &config).unwrap_err().to_string()
    });
    assert_eq!(errors[0], errors[1], "every rank reports the same difference");
    assert!(errors[0].contains("parameter `0.weight` is [64, 16] f32 on rank 0 but [32, 16] f32 on rank 1"), "{}", errors[0]);
}

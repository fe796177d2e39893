//! The DataLoader: seeded order, batching, drop-last, resuming, and independence from the
//! worker count; the bundled MNIST split.

use std::collections::HashSet;
use std::sync::Arc;

use liandan_backend_cpu as _;
use liandan_train::data::{bundled_mnist, bundled_mnist_raw, DataLoader, Dataset, TensorDataset, Transform, Transformed, MNIST_MEAN, MNIST_STD};
use liandan_train::nn::Device;

/// 103 samples of shape [2, 3] whose values encode their index, so a batch shows its indices.
fn numbered(n: usize) -> TensorDataset {
    let inputs = (0..n * 6).map(|v| v as f32).collect();
    TensorDataset::from_vecs(inputs, (0..n as i64).collect(), &[2, 3]).unwrap()
}

fn targets(loader: &DataLoader, epoch: u64, start: usize) -> Vec<Vec<i64>> {
    loader.iter_from(epoch, start).unwrap().map(|b| b.unwrap().target.to_vec::<i64>().unwrap()).collect()
}

#[test]
fn batches_cover_the_dataset_once_per_epoch() {
    let dev = Device::cpu();
    let loader = DataLoader::new(numbered(103), 10, &dev).unwrap().shuffle(5);
    assert_eq!(loader.len(), 11);
    let epoch0 = targets(&loader, 0, 0);
    assert_eq!(epoch0.len(), 11);
    assert_eq!(epoch0.last().unwrap().len(), 3);
    let seen: HashSet<i64> = epoch0.iter().flatten().copied().collect();
    assert_eq!(seen.len(), 103);
    assert_ne!(epoch0, targets(&loader, 1, 0), "each epoch reshuffles");
    assert_eq!(epoch0, targets(&loader, 0, 0), "the same seed and epoch give the same order");
    let unshuffled = DataLoader::new(numbered(103), 10, &dev).unwrap();
    assert_eq!(targets(&unshuffled, 3, 0)[0], (0..10).collect::<Vec<i64>>());
}

#[test]
fn drop_last_and_batch_shapes() {
    let dev = Device::cpu();
    let loader = DataLoader::new(numbered(103), 10, &dev).unwrap().shuffle(1).drop_last(true);
    assert_eq!(loader.len(), 10);
    let batches: Vec<_> = loader.iter(0).unwrap().map(Result::unwrap).collect();
    assert_eq!(batches.len(), 10);
    for b in &batches {
        assert_eq!(b.input.shape(), &[10, 2, 3]);
        assert_eq!(b.target.shape(), &[10]);
        // Row k of the input belongs to target k.
        let x = b.input.to_vec::<f32>().unwrap();
        for (k, t) in b.target.to_vec::<i64>().unwrap().into_iter().enumerate() {
            assert_eq!(x[k * 6], (t * 6) as f32);
        }
    }
    assert!(DataLoader::new(numbered(3), 0, &dev).is_err());
}

#[test]
fn resuming_mid_epoch_gives_the_remaining_batches() {
    let loader = DataLoader::new(numbered(103), 8, &Device::cpu()).unwrap().shuffle(9);
    let all = targets(&loader, 4, 0);
    assert_eq!(targets(&loader, 4, 5), all[5..].to_vec());
    assert!(targets(&loader, 4, loader.len()).is_empty());
    assert!(loader.iter_from(4, loader.len() + 1).is_err());
    let mut it = loader.iter_from(4, 2).unwrap();
    assert_eq!(it.len(), loader.len() - 2);
    it.next();
    assert_eq!(it.position(), 3);
}

#[test]
fn batches_do_not_depend_on_the_worker_count() {
    let (train, _) = bundled_mnist().unwrap();
    let crop = Transformed::new(Arc::new(train), vec![Transform::RandomCrop { height: 24, width: 24, padding: 2 }, Transform::RandomHorizontalFlip { p: 0.5 }])
        .unwrap();
    let crop: Arc<dyn Dataset> = Arc::new(crop);
    let dev = Device::cpu();
    let run = |workers: usize| -> Vec<(Vec<f32>, Vec<i64>)> {
        let loader = DataLoader::new(crop.clone(), 32, &dev).unwrap().shuffle(3).workers(workers);
        loader.iter_from(2, 240).unwrap().map(|b| b.unwrap()).map(|b| (b.input.to_vec().unwrap(), b.target.to_vec().unwrap())).collect()
    };
    let inline = run(0);
    assert_eq!(inline.len(), 10);
    assert_eq!(inline, run(1));
    assert_eq!(inline, run(3));
}

#[test]
fn dropping_an_iterator_early_stops_its_threads() {
    let loader = DataLoader::new(numbered(1000), 4, &Device::cpu()).unwrap().workers(3).prefetch(1);
    for _ in 0..20 {
        let mut it = loader.iter(0).unwrap();
        it.next().unwrap().unwrap();
    }
}

#[test]
fn bundled_mnist_is_split_and_normalized() {
    let raw = bundled_mnist_raw().unwrap();
    assert_eq!(raw.len(), 10_000);
    let mut counts = [0usize; 10];
    raw.labels().iter().for_each(|&l| counts[l as usize] += 1);
    assert_eq!(counts, [980, 1135, 1032, 1010, 982, 892, 958, 1028, 974, 1009]);

    let (train, val) = bundled_mnist().unwrap();
    assert_eq!((train.len(), val.len()), (8000, 2000));
    let s = train.get(0).unwrap();
    assert_eq!(s.shape, [1, 28, 28]);
    // Pixel 0 (a corner) is background: 0 scaled and normalized.
    assert!((s.input[0] - (0.0 - MNIST_MEAN) / MNIST_STD).abs() < 1e-6);
    let (mut sum, mut n) = (0.0f64, 0usize);
    for i in 0..200 {
        let x = val.get(i).unwrap().input;
        sum += x.iter().map(|&v| f64::from(v)).sum::<f64>();
        n += x.len();
    }
    // The test split's pixels are distributed like the training split's: mean near 0.
    assert!((sum / n as f64).abs() < 0.1, "mean {}", sum / n as f64);
    // The split is fixed: the same images every time, train and validation disjoint.
    let (train2, _) = bundled_mnist().unwrap();
    assert_eq!(train.get(123).unwrap(), train2.get(123).unwrap());
}

/// Fails on one index, to check that an error reaches the training loop and ends the epoch.
struct FailsAt(usize);

impl Dataset for FailsAt {
    fn len(&self) -> usize {
        40
    }
    fn get(&self, index: usize) -> liandan_train::Result<liandan_train::data::Sample> {
        if index == self.0 {
            return Err(liandan_train::Error::Data { path: "bad.bin".into(), detail: format!("sample {index} is unreadable") });
        }
        Ok(liandan_train::data::Sample { input: vec![index as f32], shape: vec![1], target: 0 })
    }
}

#[test]
fn a_dataset_error_ends_the_epoch_with_that_error() {
    for workers in [0, 2] {
        let loader = DataLoader::new(FailsAt(17), 4, &Device::cpu()).unwrap().workers(workers);
        let items: Vec<_> = loader.iter(0).unwrap().collect();
        assert_eq!(items.len(), 5, "batches 0..4 then the error");
        assert!(items[..4].iter().all(Result::is_ok));
        let msg = items[4].as_ref().err().unwrap().to_string();
        assert!(msg.contains("bad.bin") && msg.contains("sample 17"), "{msg}");
    }
}

/// The first GPU (lavapipe counts), or `None` to skip: [`liandan_tensor::testing::gpu`].
fn gpu() -> Option<Device> {
    liandan_tensor::testing::gpu().unwrap_or_else(|e| panic!("{e}"))
}

#[test]
fn batches_uploaded_to_the_gpu_from_the_loader_thread_equal_the_cpu_batches() {
    use liandan_backend_wgpu as _;
    let Some(gpu) = gpu() else { return };
    let (_, val) = bundled_mnist().unwrap();
    let val: Arc<dyn Dataset> = Arc::new(val);
    let cpu = DataLoader::new(val.clone(), 100, &Device::cpu()).unwrap().shuffle(4);
    let on_gpu = DataLoader::new(val, 100, &gpu).unwrap().shuffle(4).workers(2);
    for (a, b) in cpu.iter_from(1, 15).unwrap().zip(on_gpu.iter_from(1, 15).unwrap()) {
        let (a, b) = (a.unwrap(), b.unwrap());
        assert!(b.input.device().same(&gpu));
        assert_eq!(a.input.to_vec::<f32>().unwrap(), b.input.to_vec::<f32>().unwrap());
        assert_eq!(a.target.to_vec::<i64>().unwrap(), b.target.to_vec::<i64>().unwrap());
    }
}

#[test]
fn shards_are_disjoint_cover_the_epoch_and_make_up_the_doubled_batch() {
    let dev = Device::cpu();
    let whole = DataLoader::new(numbered(103), 4, &dev).unwrap().shuffle(9);
    let shards: Vec<DataLoader> = (0..3).map(|r| whole.clone().shard(r, 3).unwrap()).collect();
    for epoch in 0..2 {
        let parts: Vec<Vec<i64>> = shards.iter().map(|s| targets(s, epoch, 0).concat()).collect();
        // 103 = 3 * 34 + 1: every rank takes 34 samples, the one left over is dropped.
        assert!(parts.iter().all(|p| p.len() == 34), "{:?}", parts.iter().map(Vec::len).collect::<Vec<_>>());
        let seen: HashSet<i64> = parts.iter().flatten().copied().collect();
        assert_eq!(seen.len(), 102, "no sample is on two ranks");
        // Round-robin over the epoch's order: position i of the order goes to rank i % 3.
        let order = whole.order(epoch);
        for (r, part) in parts.iter().enumerate() {
            let want: Vec<i64> = order.iter().skip(r).step_by(3).take(34).map(|&i| i as i64).collect();
            assert_eq!(*part, want);
        }
    }
    // Batch k of every rank at batch B together is batch k of the whole order at batch 3B.
    let tripled = DataLoader::new(numbered(103), 12, &dev).unwrap().shuffle(9);
    let big = targets(&tripled, 0, 0);
    let small: Vec<Vec<Vec<i64>>> = shards.iter().map(|s| targets(s, 0, 0)).collect();
    for k in 0..8 {
        let mut together: Vec<i64> = small.iter().flat_map(|s| s[k].clone()).collect();
        let mut want = big[k].clone();
        together.sort_unstable();
        want.sort_unstable();
        assert_eq!(together, want, "batch {k}");
    }
    // Evaluation keeps every sample: one more on the first rank.
    let all: Vec<usize> = (0..3).map(|r| whole.clone().shard_all(r, 3).unwrap().samples()).collect();
    assert_eq!(all, [35, 34, 34]);
    let seen: HashSet<usize> = (0..3).flat_map(|r| whole.clone().shard_all(r, 3).unwrap().order(0)).collect();
    assert_eq!(seen.len(), 103);
    assert!(whole.clone().shard(3, 3).is_err());
}

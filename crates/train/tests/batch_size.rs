//! `find_batch_size` under a CPU memory budget. Alone in its test binary: the CPU's memory
//! accounts and budget are process-wide, and a test running beside it would spend the budget.

use liandan_train::amp::Precision;
use liandan_train::batch_size::{find_batch_size, zoo_step};
use liandan_train::nn::Device;
use liandan_train::Error;

#[test]
fn the_largest_batch_fits_the_budget_and_one_more_does_not() {
    let dev = Device::cpu();
    let start = dev.memory_stats().unwrap().in_use;
    let budget = start + (12 << 20);
    assert!(dev.set_memory_budget(Some(budget)));
    let found = find_batch_size(&dev, 1, 1 << 14, zoo_step("mlp", Precision::F32, &dev).unwrap());
    dev.set_memory_budget(None);
    let r = found.unwrap();
    // The search doubled up to the first failure and bisected to neighbours: the answer
    // fitted, the next size was tried and did not.
    assert!(r.trials.iter().any(|t| t.batch == r.batch && t.fits), "{r:?}");
    assert!(r.trials.iter().any(|t| t.batch == r.batch + 1 && !t.fits), "{r:?}");
    assert!(r.trials.iter().filter(|t| t.fits).all(|t| t.batch <= r.batch), "{r:?}");
    assert!(r.trials.iter().filter(|t| !t.fits).all(|t| t.batch > r.batch), "{r:?}");
    // The mlp's weights, gradients and SGD step take about 5 MiB, each sample some 20 KiB:
    // the budget allows tens to a few hundred samples.
    assert!((16..1024).contains(&r.batch), "{r:?}");
    assert!(r.peak_bytes <= budget && r.peak_bytes > start + (5 << 20), "peak {} of a budget of {budget}: {r:?}", r.peak_bytes);
    assert_eq!(dev.memory_stats().unwrap().in_use, start, "every failed step gave its memory back");

    assert!(dev.set_memory_budget(Some(start + (1 << 20))));
    let none = find_batch_size(&dev, 1, 8, zoo_step("mlp", Precision::F32, &dev).unwrap());
    dev.set_memory_budget(None);
    match none {
        Err(Error::InvalidArgument { what, .. }) => assert!(what.contains("not even a batch of 1 fits"), "{what}"),
        other => panic!("a budget below the weights' size found {other:?}"),
    }
}

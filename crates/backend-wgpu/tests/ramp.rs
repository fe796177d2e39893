//! The recorder's batch ramp, on a device of its own (another test's dispatches or waits on a
//! shared device would move where this one's batches end).

use liandan_backend_wgpu::testing::{dispatches_recorded, host_phases};
use liandan_tensor::{DType, LaterRead, Tensor};

mod common;

/// After a wait the recorder submits at 16 dispatches, then 32, then at every 64 (`RAMP_TOP` in
/// `gpu.rs`): 240 single-dispatch adds are five submits (a ramp up to 512 made them four).
#[test]
fn batches_ramp_up_to_64_dispatches_after_a_wait() {
    let Some(d) = common::gpu_with(|o| o.testing.host_phases = true) else { return };
    let x = Tensor::full(&[8], 1.0, DType::F32, &d).unwrap();
    x.add(&x).unwrap().to_vec::<f32>().unwrap();
    d.synchronize().unwrap();
    let (submits, dispatches) = (host_phases().submits, dispatches_recorded());
    let mut y = x.clone();
    for _ in 0..240 {
        y = y.add(&x).unwrap();
    }
    let (submitted, recorded) = (host_phases().submits - submits, dispatches_recorded() - dispatches);
    assert_eq!(recorded, 240, "one dispatch an add");
    assert_eq!(submitted, 5, "batches of 16, 32, 64, 64 and 64");
    assert_eq!(y.to_vec::<f32>().unwrap(), vec![241.0; 8]);
}

/// Full batches of 512 from the first (`first_batch` at 512): the same adds are one submit at
/// the read-back.
#[test]
fn a_first_batch_of_512_submits_in_full_batches() {
    let Some(d) = common::gpu_with(|o| {
        o.testing.host_phases = true;
        o.testing.first_batch = 512;
    }) else {
        return;
    };
    let x = Tensor::full(&[8], 1.0, DType::F32, &d).unwrap();
    d.synchronize().unwrap();
    let submits = host_phases().submits;
    let mut y = x.clone();
    for _ in 0..240 {
        y = y.add(&x).unwrap();
    }
    assert_eq!(host_phases().submits - submits, 0, "no batch is full yet");
    assert_eq!(y.to_vec::<f32>().unwrap(), vec![241.0; 8]);
}

/// On a device of its own whose first batch is 512 dispatches: `x + x` (of ones), a later read
/// of it made by `read`, ten more adds, then the read taken. The submits counted from the first
/// add: right after the read was made, after the ten adds, and after the read was taken.
fn later_read(adds: usize, read: impl Fn(&Tensor) -> LaterRead) -> Option<[u64; 3]> {
    let d = common::gpu_with(|o| {
        o.testing.host_phases = true;
        o.testing.first_batch = 512;
    })?;
    let x = Tensor::full(&[8], 1.0, DType::F32, &d).unwrap();
    d.synchronize().unwrap();
    let submits = host_phases().submits;
    let y = x.add(&x).unwrap();
    let later = read(&y);
    let made = host_phases().submits - submits;
    let mut z = y.clone();
    for _ in 0..adds {
        z = z.add(&x).unwrap();
    }
    let added = host_phases().submits - submits;
    assert_eq!(later.to_vec_f64().unwrap(), vec![2.0; 8]);
    let taken = host_phases().submits - submits;
    assert_eq!(z.to_vec::<f32>().unwrap(), vec![2.0 + adds as f32; 8]);
    Some([made, added, taken])
}

/// A later read-back ends its batch before the next dispatch: taking it waits only for the
/// work recorded before the copy, and submits nothing more.
#[test]
fn a_later_read_ends_its_batch() {
    let Some(submits) = later_read(10, |y| y.read_later().unwrap()) else { return };
    // The copy is recorded, not submitted; the batch ended with it; taking it submitted nothing.
    assert_eq!(submits, [0, 1, 1]);
}

/// A later read-back in its batch leaves the batch open: the dispatches after it join the
/// copy's batch, and taking the read submits that batch (once) and waits for it.
#[test]
fn a_later_read_in_its_batch_leaves_it_open() {
    let Some(submits) = later_read(10, |y| y.read_later_in_batch().unwrap()) else { return };
    assert_eq!(submits, [0, 0, 1]);
}

/// ... but not for long: sixteen dispatches after the copy its batch ends, far below the
/// 512 of the batch it was in, so that the read, taken a step or more on, finds it done (or
/// under way) rather than submitting it and idling the GPU while it runs.
#[test]
fn a_later_read_in_its_batch_ends_it_soon() {
    let Some(submits) = later_read(20, |y| y.read_later_in_batch().unwrap()) else { return };
    assert_eq!(submits, [0, 1, 1]);
}

/// Small later reads reuse their read-back buffers: each still returns its own values, with
/// reads in flight together, reads dropped untaken, and a read too large for a kept buffer.
#[test]
fn later_reads_keep_their_values_when_their_buffers_are_reused() {
    let Some(d) = common::gpu_with(|_| {}) else {
        return;
    };
    let x = Tensor::full(&[4], 1.0, DType::F32, &d).unwrap();
    for round in 0..6 {
        let k = round as f64 * 3.0;
        let a = x.mul_scalar(k + 1.0).unwrap().read_later().unwrap();
        let dropped = x.mul_scalar(-1.0).unwrap().read_later().unwrap();
        let b = x.mul_scalar(k + 2.0).unwrap().read_later().unwrap();
        drop(dropped);
        let large = Tensor::full(&[200], k + 3.0, DType::F32, &d).unwrap().read_later().unwrap();
        assert_eq!(b.to_vec_f64().unwrap(), vec![k + 2.0; 4], "round {round}");
        assert_eq!(a.to_vec_f64().unwrap(), vec![k + 1.0; 4], "round {round}");
        assert_eq!(large.to_vec_f64().unwrap(), vec![k + 3.0; 200], "round {round}");
    }
}

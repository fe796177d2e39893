//! The recorder's batch ramp, alone in its process: the device's recorder is shared, so another
//! test's dispatches or waits on the same device would move where this one's batches end.

use liandan_backend_wgpu::{count_host_phases, dispatches_recorded, host_phases};
use liandan_tensor::{DType, Tensor};

mod common;
use common::gpu;

/// After a wait the recorder submits at 16 dispatches, then 32, then at every 64 (`RAMP_TOP` in
/// `gpu.rs`): 240 single-dispatch adds are five submits (a ramp up to 512 made them four).
#[test]
fn batches_ramp_up_to_64_dispatches_after_a_wait() {
    let Some(d) = gpu() else { return };
    if ["LIANDAN_WGPU_FIRST_BATCH", "LIANDAN_WGPU_RAMP_TOP"].iter().any(|v| std::env::var_os(v).is_some()) {
        eprintln!("skipping: LIANDAN_WGPU_FIRST_BATCH or LIANDAN_WGPU_RAMP_TOP sets another ramp");
        return;
    }
    let x = Tensor::full(&[8], 1.0, DType::F32, &d).unwrap();
    x.add(&x).unwrap().to_vec::<f32>().unwrap();
    d.synchronize().unwrap();
    count_host_phases(true);
    let (submits, dispatches) = (host_phases().submits, dispatches_recorded());
    let mut y = x.clone();
    for _ in 0..240 {
        y = y.add(&x).unwrap();
    }
    let (submitted, recorded) = (host_phases().submits - submits, dispatches_recorded() - dispatches);
    count_host_phases(false);
    assert_eq!(recorded, 240, "one dispatch an add");
    assert_eq!(submitted, 5, "batches of 16, 32, 64, 64 and 64");
    assert_eq!(y.to_vec::<f32>().unwrap(), vec![241.0; 8]);
}

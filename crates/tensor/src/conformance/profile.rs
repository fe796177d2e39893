//! The profiler on a backend: exact call counts for a tiny model, a trace with one event per
//! call, and results that do not change when profiling is on. Sessions are process-wide, so
//! each backend runs [`check_profile`] alone in a test binary of its own (no other test's ops
//! may run meanwhile).

use crate::profile;
use crate::{DType, Device, Result, Tensor};

/// One training step of `relu(x @ w)` summed, in a layer `Linear`: the loss and `w`'s gradient.
fn step(x: &Tensor, w: &Tensor) -> Result<(Vec<f32>, Vec<f32>)> {
    w.set_grad(None);
    let y = {
        let _layer = profile::layer("Linear");
        x.matmul(w)?.relu()?
    };
    let loss = y.sum_all()?;
    loss.backward()?;
    Ok((loss.to_vec::<f32>()?, w.grad().expect("w requires grad").to_vec::<f32>()?))
}

/// The kernel calls of one `step`: (op, layer, calls). The forward's relu is one fused kernel
/// (both backends have it); its rule meets the sum's broadcast gradient, so it compares its
/// output with zero (a zero made once, by the unprofiled step, and cached) and selects the
/// gradient as it is; `backward()` fills the loss's gradient outside the backward pass
/// proper; the read-backs are the loss and the gradient.
const EXPECTED: &[(&str, &str, u64)] = &[
    ("matmul", "Linear", 1),
    ("fused relu", "Linear", 1),
    ("sum", "", 1),
    ("full", "", 1),
    ("gt", "backward", 1),
    ("select", "backward", 1),
    ("matmul", "backward", 1),
    ("to_host", "", 2),
];

pub fn check_profile(d: &Device) {
    assert!(profile::stop().is_err(), "stop without a session");
    let x = Tensor::randn(&[4, 3], 1, DType::F32, d).unwrap();
    let w = Tensor::randn(&[3, 2], 2, DType::F32, d).unwrap().requires_grad_(true).unwrap();
    let plain = step(&x, &w).unwrap();

    profile::start().unwrap();
    assert!(profile::start().is_err(), "a second session while one runs");
    let profiled = step(&x, &w);
    let p = profile::stop().unwrap();
    assert_eq!(profiled.unwrap(), plain, "profiling changed a result");

    // Exact counts, by op and layer.
    let mut got: Vec<(String, String, u64)> = Vec::new();
    for e in p.events() {
        match got.iter_mut().find(|g| g.0 == e.name && g.1 == e.layer) {
            Some(g) => g.2 += 1,
            None => got.push((e.name.clone(), e.layer.clone(), 1)),
        }
    }
    let mut want: Vec<(String, String, u64)> = EXPECTED.iter().map(|&(o, l, n)| (o.to_string(), l.to_string(), n)).collect();
    got.sort();
    want.sort();
    assert_eq!(got, want, "calls by (op, layer) on {d}");
    let calls = |rows: Vec<profile::Row>, name: &str| rows.iter().find(|r| r.name == name).map(|r| r.calls);
    assert_eq!((calls(p.by_op(), "matmul"), calls(p.by_op(), "select")), (Some(2), Some(1)));
    assert_eq!((calls(p.by_layer(), "Linear"), calls(p.by_layer(), "backward"), calls(p.by_layer(), "(no layer)")), (Some(2), Some(3), Some(4)));
    let table = p.to_string();
    assert!(table.contains("matmul") && table.contains("Linear"), "{table}");

    // Device time where the device can measure it, else a note saying it was not measured.
    if d.is_cpu() {
        assert!(!p.gpu_measured && p.notes.is_empty(), "{:?}", p.notes);
    } else if p.gpu_measured {
        assert!(p.events().iter().filter(|e| e.name == "matmul").all(|e| e.gpu_us.is_some()), "every kernel is timed");
    } else {
        assert!(p.notes.iter().any(|n| n.contains("GPU time not measured")), "{:?}", p.notes);
    }
    if d.memory_stats().is_some() {
        assert!(p.memory.len() == 1 && p.memory[0].peak > 0, "{:?}", p.memory);
    }

    // The trace: one complete event per call, as Perfetto reads them, written atomically.
    let json: serde_json::Value = serde_json::from_str(&p.trace_json()).expect("the trace is JSON");
    let events = json["traceEvents"].as_array().expect("traceEvents");
    assert_eq!(events.len() as u64, EXPECTED.iter().map(|e| e.2).sum::<u64>());
    for e in events {
        assert_eq!(e["ph"], "X");
        assert!(e["name"].is_string() && e["ts"].as_f64().is_some() && e["dur"].as_f64().unwrap() >= 0.0 && e["tid"].is_u64() && e["pid"].is_u64(), "{e}");
    }
    let dir = std::env::temp_dir().join(format!("liandan-profile-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("trace.json");
    p.write_trace(&path).unwrap();
    assert_eq!(std::fs::read_to_string(&path).unwrap(), p.trace_json());
    assert_eq!(std::fs::read_dir(&dir).unwrap().count(), 1, "no temporary file is left");
    assert!(p.write_trace(&dir.join("missing").join("trace.json")).is_err());
    std::fs::remove_dir_all(&dir).unwrap();

    // Without `record_shapes` no shapes; with it, every call's inputs and the products' operations.
    assert!(p.by_op_and_shapes().is_empty() && p.events().iter().all(|e| e.shapes.is_none()));
    assert!(!p.to_string().contains("input shapes"));
    profile::start_with(profile::Options { record_shapes: true }).unwrap();
    let profiled = step(&x, &w);
    let p = profile::stop().unwrap();
    assert_eq!(profiled.unwrap(), plain, "recording shapes changed a result");
    let rows = p.by_op_and_shapes();
    let row = |name: &str, shapes: &str| rows.iter().find(|r| r.name == name && r.shapes.as_deref() == Some(shapes)).map(|r| (r.calls, r.flops));
    // The shapes the kernel trait receives (products batched, a whole sum as one row): forward
    // x [4, 3] @ w [3, 2]; backward x^T [3, 4] @ dy [4, 2]: 2 * 4 * 3 * 2 operations each.
    assert_eq!(row("matmul", "[1, 4, 3] f32, [1, 3, 2] f32"), Some((1, Some(48))), "{rows:?}");
    assert_eq!(row("matmul", "[1, 3, 4] f32, [1, 4, 2] f32"), Some((1, Some(48))), "{rows:?}");
    assert_eq!(row("select", "[4, 2] bool, [4, 2] f32, [4, 2] f32"), Some((1, None)), "{rows:?}");
    assert_eq!(rows.iter().map(|r| r.calls).sum::<u64>(), EXPECTED.iter().map(|e| e.2).sum::<u64>());
    let table = p.to_string();
    assert!(table.contains("input shapes") && table.contains("[1, 4, 3] f32, [1, 3, 2] f32"), "{table}");
    let json: serde_json::Value = serde_json::from_str(&p.trace_json()).expect("the trace is JSON");
    let traced = json["traceEvents"].as_array().expect("traceEvents").iter().filter(|e| e["args"]["input_shapes"] == "[1, 4, 3] f32, [1, 3, 2] f32").count();
    assert_eq!(traced, 1, "the trace carries each call's shapes");

    // Off again: nothing is recorded, results are unchanged.
    assert_eq!(step(&x, &w).unwrap(), plain);
    profile::start().unwrap();
    assert!(profile::stop().unwrap().events().is_empty(), "calls made while off were recorded");
}

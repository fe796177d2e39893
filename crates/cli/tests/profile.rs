//! `liandan profile`, run as a user runs it.

use std::process::{Command, Output};

fn liandan(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_liandan")).args(args).output().expect("the liandan binary runs")
}

#[test]
fn profile_prints_tables_and_writes_a_trace() {
    let dir = tempfile::tempdir().unwrap();
    let trace = dir.path().join("trace.json");
    let o = liandan(&["profile", "--model", "mlp", "--batch", "2", "--steps", "2", "--device", "cpu", "--trace", trace.to_str().unwrap()]);
    let (out, err) = (String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr));
    assert!(o.status.success(), "{err}");
    // Per step: three linear layers forward, each a product with its bias; backward, each
    // weight's gradient and the input gradients of the two upper layers (the data needs
    // none). Two steps.
    let calls = |op: &str| {
        let line = out.lines().find(|l| l.starts_with(op)).unwrap_or_else(|| panic!("no {op}row:\n{out}"));
        line.split_whitespace().rev().nth(3).map(str::to_owned)
    };
    assert_eq!((calls("matmul ").as_deref(), calls("fused matmul_bias ").as_deref()), (Some("10"), Some("6")), "{out}");
    for layer in ["Linear", "backward", "optimizer"] {
        assert!(out.lines().any(|l| l.starts_with(layer)), "no {layer} row:\n{out}");
    }
    assert!(out.contains("GPU time not measured"), "{out}");
    assert!(!out.contains("input shapes"), "shapes are recorded only when asked:\n{out}");
    let json: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&trace).unwrap()).expect("the trace is JSON");
    let calls: u64 = out
        .lines()
        .skip_while(|l| !l.starts_with("op "))
        .skip(1)
        .take_while(|l| !l.is_empty())
        // The calls column is the fourth from the right (an op's name may hold a space: `fused sgd_step`).
        .map(|l| l.split_whitespace().rev().nth(3).unwrap().parse::<u64>().unwrap())
        .sum();
    assert_eq!(json["traceEvents"].as_array().unwrap().len() as u64, calls, "one trace event per call");
}

/// `liandan profile --shapes` of `model` on the CPU, `steps` steps of a batch of 2: its stdout
/// and the rows of its shapes table.
fn shapes_table(model: &str, steps: &str) -> (String, Vec<String>) {
    let o = liandan(&["profile", "--model", model, "--batch", "2", "--steps", steps, "--device", "cpu", "--shapes"]);
    let (out, err) = (String::from_utf8_lossy(&o.stdout).into_owned(), String::from_utf8_lossy(&o.stderr));
    assert!(o.status.success(), "{err}");
    let table = out.lines().skip_while(|l| !l.ends_with("input shapes")).skip(1).take_while(|l| !l.is_empty()).map(String::from).collect();
    (out, table)
}

/// The row of `table` (from `out`) for op `op` on inputs `shapes`.
fn row<'a>(table: &'a [String], op: &str, shapes: &str, out: &str) -> &'a str {
    table.iter().find(|l| l.starts_with(op) && l.contains(shapes)).unwrap_or_else(|| panic!("no {op}row for {shapes}:\n{out}"))
}

#[test]
fn profile_shapes_prints_each_product_with_its_shapes_and_rate() {
    let (out, table) = shapes_table("mlp", "2");
    // fc1's forward: the batch [2, 1024], the weight [512, 1024] and its bias, once a step.
    let fc1 = row(&table, "fused matmul_bias ", "[2, 1024] f32, [512, 1024] f32, [512] f32", &out);
    let cols: Vec<&str> = fc1.split_whitespace().collect();
    assert_eq!(cols[2], "2", "{fc1}");
    assert!(cols[5].parse::<f64>().is_ok_and(|r| r > 0.0), "a product's rate: {fc1}");
    // Its weight gradient: dy^T [512, 2] times the batch (as the kernel trait receives them,
    // batched).
    let dw = row(&table, "matmul ", "[1, 512, 2] f32, [1, 2, 1024] f32", &out);
    assert!(dw.split_whitespace().nth(4).is_some_and(|r| r.parse::<f64>().is_ok_and(|r| r > 0.0)), "a product's rate: {dw}");
    // Ops that are not products have shapes but no counted operations.
    assert!(table.iter().any(|l| !l.starts_with("matmul ") && l.split_whitespace().nth(4) == Some("-")), "{out}");
}

#[test]
fn profile_shapes_counts_a_fused_convolution_and_relu_as_a_convolution() {
    let (out, table) = shapes_table("mnist_cnn", "1");
    // conv1: [2, 1, 28, 28] with [32, 1, 3, 3] and its bias, ReLU applied as it is stored.
    let conv1 = row(&table, "fused conv2d_bias_relu ", "[2, 1, 28, 28] f32, [32, 1, 3, 3] f32", &out);
    let rate = conv1.split_whitespace().nth(5).unwrap_or("");
    assert!(rate.parse::<f64>().is_ok_and(|r| r > 0.0), "a convolution's rate: {conv1}");
}

/// The calls of op `name` in the op table, if it has a row.
fn calls(out: &str, name: &str) -> Option<u64> {
    let row = out.lines().skip_while(|l| !l.starts_with("op ")).take_while(|l| !l.is_empty()).find(|l| l.split_whitespace().next() == Some(name))?;
    row.split_whitespace().nth(1)?.parse().ok()
}

/// A long warm-up (a fast GPU's second) trains with the model's own optimizer: the VAE's
/// summed loss stays finite in f16, where plain SGD at one lr drove it to infinity and the
/// loss scaler gave up.
#[test]
fn a_long_f16_profile_of_the_vae_stays_finite() {
    let o = liandan(&[
        "profile",
        "--model",
        "vae",
        "--batch",
        "32",
        "--warmup",
        "200",
        "--steps",
        "1",
        "--device",
        "cpu",
        "--precision",
        "f16",
        "--autocast-min-ops",
        "0",
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
}

#[test]
fn profile_runs_mixed_precision_as_train_does() {
    let run_with = |precision: &str, min_ops: &str| {
        let o =
            liandan(&["profile", "--model", "mlp", "--batch", "2", "--steps", "2", "--device", "cpu", "--precision", precision, "--autocast-min-ops", min_ops]);
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        String::from_utf8_lossy(&o.stdout).into_owned()
    };
    let run = |precision: &str| run_with(precision, "0");
    let f32 = run("f32");
    assert_eq!(calls(&f32, "cast"), None, "f32 casts nothing:\n{f32}");
    assert_eq!(calls(&f32, "to_host"), None, "f32 reads nothing back:\n{f32}");
    // At batch 2 every product is under the default minimum: f16 computes them in f32 and casts nothing.
    let small = run_with("f16", "268435456");
    assert_eq!(calls(&small, "cast"), None, "products under the minimum are not cast:\n{small}");
    // Nothing computed in f16, so no loss scaling either: the f32 step's ops, nothing read back.
    let total = |out: &str| out.lines().find_map(|l| l.split_once(" calls in ").map(|(n, _)| n.trim().to_string()));
    assert_eq!(calls(&small, "to_host"), None, "{small}");
    assert_eq!(total(&small), total(&f32), "the f32 step's calls:\n{small}\n{f32}");
    // Autocast: the layers' inputs and weights go to the low type. In f16, the loss scaler's
    // overflow check is read back once a step.
    for precision in ["f16", "bf16"] {
        let out = run(precision);
        assert!(calls(&out, "cast").is_some_and(|n| n > 0), "{precision}: no casts:\n{out}");
        let reads = calls(&out, "to_host");
        assert_eq!(reads, (precision == "f16").then_some(2), "{precision}: read-backs:\n{out}");
    }
    let o = liandan(&["profile", "--model", "mlp", "--device", "cpu", "--precision", "f8"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("f32, f16 or bf16"));
}

#[test]
fn profile_names_what_is_wrong_with_its_input() {
    let o = liandan(&["profile", "--model", "nope", "--device", "cpu"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("mnist_cnn"), "lists the known models");
    let o = liandan(&["profile", "--model", "mlp", "--device", "cpu", "--trace", "/nonexistent-dir/trace.json"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("does not exist"));
}

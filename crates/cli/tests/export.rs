//! `liandan export`, run as a user runs it: a checkpoint in, an ONNX file out, and one line
//! with exit status 2 for what the user can fix.

use std::path::Path;
use std::process::{Command, Output};

use liandan_nn::export::proto::tensor_shape_proto::dimension::Value;
use liandan_nn::export::proto::type_proto;
use liandan_nn::{export, manual_seed, zoo, Device, ModuleExt};

fn liandan(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_liandan")).args(args).output().expect("the liandan binary runs")
}

fn text(o: &Output) -> (String, String) {
    (String::from_utf8_lossy(&o.stdout).into_owned(), String::from_utf8_lossy(&o.stderr).into_owned())
}

/// A fresh zoo model's state dict, saved in `dir`.
fn checkpoint(dir: &Path, model: &str) -> String {
    manual_seed(3);
    let path = dir.join(format!("{model}.safetensors"));
    zoo::build(model, &Device::cpu()).unwrap().save(&path).unwrap();
    path.to_str().unwrap().to_string()
}

/// The first input's dimensions: a number, or the name of a dynamic one.
fn input_dims(path: &Path) -> Vec<String> {
    let model = export::read(path).unwrap();
    let input = &model.graph.unwrap().input[0];
    let Some(type_proto::Value::TensorType(t)) = &input.r#type.as_ref().unwrap().value else { panic!("not a tensor input") };
    let dims = &t.shape.as_ref().unwrap().dim;
    dims.iter()
        .map(|d| match d.value.as_ref().unwrap() {
            Value::DimValue(n) => n.to_string(),
            Value::DimParam(p) => p.clone(),
        })
        .collect()
}

#[test]
fn export_writes_an_onnx_model_with_the_checkpoints_weights() {
    let dir = tempfile::tempdir().unwrap();
    let ckpt = checkpoint(dir.path(), "mlp");
    let out = dir.path().join("mlp.onnx");
    let o = liandan(&["export", "--model", "mlp", "--checkpoint", &ckpt, "--out", out.to_str().unwrap()]);
    let (stdout, err) = text(&o);
    assert!(o.status.success(), "{err}");
    assert!(stdout.contains("mlp for ONNX opset 17, 658,698 parameters") && stdout.contains("Gemm 3"), "{stdout}");
    assert_eq!(input_dims(&out), ["batch", "1024"]);
    let model = export::read(&out).unwrap();
    let graph = model.graph.unwrap();
    assert_eq!(graph.name.as_deref(), Some("mlp"));
    let names: Vec<&str> = graph.initializer.iter().filter_map(|t| t.name.as_deref()).collect();
    for key in ["fc1.weight", "fc1.bias", "fc3.weight"] {
        assert!(names.contains(&key), "{names:?}");
    }

    // Again, with a fixed batch: the file is replaced, and says so.
    let o = liandan(&["export", "--model", "mlp", "--checkpoint", &ckpt, "--out", out.to_str().unwrap(), "--batch", "3", "--opset", "20"]);
    let (stdout, err) = text(&o);
    assert!(o.status.success(), "{err}");
    assert!(stdout.contains("replaced the file that was there"), "{stdout}");
    assert_eq!(input_dims(&out), ["3", "1024"]);
    assert_eq!(export::read(&out).unwrap().opset_import[0].version, Some(20));
}

#[test]
fn export_mistakes_exit_2_with_one_line() {
    let dir = tempfile::tempdir().unwrap();
    let ckpt = checkpoint(dir.path(), "mlp");
    let out = dir.path().join("m.onnx");
    let out = out.to_str().unwrap();
    let missing_dir = dir.path().join("no/such/dir/m.onnx");
    let here = dir.path().to_str().unwrap();
    for (args, needle) in [
        (vec!["--model", "mnist_cnn", "--checkpoint", &ckpt, "--out", out], "is it a checkpoint of another model?"),
        (vec!["--model", "mlp", "--checkpoint", "no-such.safetensors", "--out", out], "no such checkpoint file"),
        (vec!["--model", "mlp", "--checkpoint", &ckpt, "--out", missing_dir.to_str().unwrap()], "does the directory exist"),
        (vec!["--model", "mlp", "--checkpoint", &ckpt, "--out", here], "is a directory"),
        (vec!["--model", "mlp", "--checkpoint", &ckpt, "--out", out, "--opset", "12"], "opsets 17 to 21"),
        (vec!["--model", "mlp", "--checkpoint", &ckpt, "--out", out, "--batch", "0"], "`dynamic` or a positive batch size"),
        (vec!["--model", "alexnet", "--checkpoint", &ckpt, "--out", out], "no model named `alexnet`"),
    ] {
        let o = liandan(&[&["export"][..], &args].concat());
        let (_, err) = text(&o);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {err}");
        assert!(err.contains(needle), "{args:?}: {err}");
        assert_eq!(err.trim_end().lines().count(), 1, "{args:?}: {err}");
    }
    assert!(!Path::new(out).exists(), "a failed export left a file behind");
}

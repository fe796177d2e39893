//! What a program built on liandan-nn and liandan-train meets first: errors that compose with
//! `?` in both directions, `AdamW` that is AdamW, examples that name only the two crates, and
//! a build without the downloads and the plots.

use std::path::Path;
use std::process::Command;

use liandan_nn::{zoo, DType, Device, ModuleExt, Tensor};
use liandan_train::optim::{Adam, AdamConfig, AdamW, AdamWConfig, Optimizer};

#[path = "../../nn/tests/common/examples.rs"]
mod examples;

/// A function of `liandan_nn::Result` that calls an optimizer: `?` converts its errors.
fn one_step(lr: f64) -> liandan_nn::Result<Vec<f64>> {
    let dev = Device::cpu();
    liandan_nn::manual_seed(1);
    let model = zoo::build("mlp", &dev)?;
    let mut optimizer = AdamW::new(model.named_parameters(), AdamWConfig::new(lr))?;
    let x = Tensor::rand(&[4, 1024], 0.0, 1.0, 2, DType::F32, &dev)?;
    let y = Tensor::from_vec(vec![0i64, 1, 2, 3], &[4], &dev)?;
    model.loss(&x, Some(&y))?.backward()?;
    optimizer.step()?;
    Ok(model.parameters()[0].to_vec_f64()?)
}

#[test]
fn errors_compose_with_question_marks_both_ways() {
    assert!(one_step(1e-3).is_ok());
    let e = one_step(-1.0).expect_err("a negative learning rate");
    assert!(e.to_string().contains("lr -1"), "{e}");
    let liandan_nn::Error::Other(inner) = &e else { panic!("carried as it is: {e:?}") };
    assert!(matches!(inner.downcast_ref::<liandan_train::Error>(), Some(liandan_train::Error::InvalidArgument { .. })));
    // Back into liandan-train's error: the original, not wrapped twice.
    let back: liandan_train::Error = e.into();
    assert!(matches!(back, liandan_train::Error::InvalidArgument { .. }), "{back:?}");
    // liandan-nn's own errors stay themselves on the way through.
    let nn: liandan_nn::Error = liandan_train::Error::from(liandan_nn::Error::DuplicateKey { key: "w".into() }).into();
    assert!(matches!(nn, liandan_nn::Error::DuplicateKey { .. }));
}

/// With a zero gradient Adam leaves a weight alone and AdamW shrinks it by `lr * weight_decay`.
#[test]
fn adamw_with_its_default_config_decays_the_weights() {
    let dev = Device::cpu();
    let start = vec![1.0f32, -2.0, 4.0];
    let run = |optimizer: &mut dyn Optimizer, w: &Tensor| {
        w.sum_all().unwrap().mul_scalar(0.0).unwrap().backward().unwrap();
        optimizer.step().unwrap();
        w.to_vec::<f32>().unwrap()
    };
    let w = Tensor::from_vec(start.clone(), &[3], &dev).unwrap().requires_grad_(true).unwrap();
    let mut adamw = AdamW::new(vec![("w".to_string(), w.clone())], AdamWConfig::default()).unwrap();
    let decayed = run(&mut adamw, &w);
    for (got, s) in decayed.iter().zip(&start) {
        assert!((got - s * (1.0 - 1e-3 * 1e-2)).abs() < 1e-7, "{decayed:?}");
    }
    let w = Tensor::from_vec(start.clone(), &[3], &dev).unwrap().requires_grad_(true).unwrap();
    let mut adam = Adam::new(vec![("w".to_string(), w.clone())], AdamConfig::default()).unwrap();
    assert_eq!(run(&mut adam, &w), start);
    // The saved state says which it was.
    assert_eq!(adamw.state_dict().unwrap().hyper["optimizer"], "AdamW");
}

#[test]
fn the_examples_name_only_liandan_nn_and_liandan_train() {
    examples::examples_name_only(&["liandan_nn", "liandan_train"], "built on liandan-nn and liandan-train");
}

/// `default-features = false` leaves out the HTTP client, TLS, the plotting crates, the image
/// decoders, the CSV reader and protobuf.
#[test]
fn a_build_without_default_features_has_no_downloads_or_plots() {
    let manifest = Path::new(env!("CARGO_MANIFEST_DIR")).join("Cargo.toml");
    let tree = |features: &[&str]| {
        let o = Command::new(env!("CARGO"))
            .args(["tree", "--offline", "--edges", "normal", "--prefix", "none", "--format", "{p}", "--manifest-path"])
            .arg(&manifest)
            .args(features)
            .output()
            .expect("cargo runs");
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        String::from_utf8_lossy(&o.stdout).lines().filter_map(|l| l.split_whitespace().next().map(str::to_string)).collect::<Vec<_>>()
    };
    let bare = tree(&["--no-default-features"]);
    for heavy in ["ureq", "rustls", "plotters", "image", "csv", "prost", "wgpu"] {
        assert!(!bare.iter().any(|p| p == heavy), "{heavy} is built without default features: {bare:?}");
    }
    let full = tree(&[]);
    for wanted in ["ureq", "plotters", "image", "csv", "prost", "wgpu"] {
        assert!(full.iter().any(|p| p == wanted), "{wanted} is missing from the default build: {full:?}");
    }
}

//! Checkpoint I/O: round trips, PyTorch's files, broken files, atomic saves, state-dict loading.

use std::collections::HashMap;
use std::fs;
use std::path::{Path, PathBuf};

use liandan_nn::checkpoint::{load, load_state_dict, load_with_metadata, save, SizeMismatch};
use liandan_nn::Error;
use liandan_nn::{Bool8, DType, Device, Tensor};

type R = Result<(), Box<dyn std::error::Error>>;

fn data(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data").join(name)
}

fn named(pairs: Vec<(&str, Tensor)>) -> Vec<(String, Tensor)> {
    pairs.into_iter().map(|(k, t)| (k.to_string(), t)).collect()
}

/// The elements of `t` as little-endian bytes, written independently of the crate's writer.
fn le_bytes(t: &Tensor) -> Vec<u8> {
    match t.dtype() {
        DType::F32 => t.to_vec::<f32>().unwrap().iter().flat_map(|x| x.to_le_bytes()).collect(),
        DType::F64 => t.to_vec::<f64>().unwrap().iter().flat_map(|x| x.to_le_bytes()).collect(),
        DType::F16 => t.to_vec::<half::f16>().unwrap().iter().flat_map(|x| x.to_bits().to_le_bytes()).collect(),
        DType::BF16 => t.to_vec::<half::bf16>().unwrap().iter().flat_map(|x| x.to_bits().to_le_bytes()).collect(),
        DType::I64 => t.to_vec::<i64>().unwrap().iter().flat_map(|x| x.to_le_bytes()).collect(),
        DType::U8 => t.to_vec::<u8>().unwrap(),
        DType::Bool => t.to_vec::<Bool8>().unwrap().iter().map(|b| b.0).collect(),
    }
}

/// One tensor of every dtype, contiguous and not: transposes, narrowed and permuted views, a
/// broadcast (stride 0), a 0-d scalar, a 6-D tensor and an empty one. Seeded values, never zeros.
fn zoo(dev: &Device) -> Vec<(String, Tensor)> {
    let ints: Vec<i64> = vec![i64::MIN, -7, 0, 1, 42, i64::MAX];
    named(vec![
        ("f32.plain", Tensor::randn(&[4, 5], 1, DType::F32, dev).unwrap()),
        ("f32.transposed", Tensor::randn(&[3, 4], 2, DType::F32, dev).unwrap().t().unwrap()),
        ("f32.scalar", Tensor::scalar(-2.5, DType::F32, dev).unwrap()),
        ("f32.six_d", Tensor::randn(&[2, 1, 3, 1, 2, 2], 3, DType::F32, dev).unwrap()),
        ("f32.six_d_permuted", Tensor::randn(&[2, 1, 3, 1, 2, 2], 4, DType::F32, dev).unwrap().permute(&[5, 2, 0, 4, 1, 3]).unwrap()),
        ("f32.empty", Tensor::zeros(&[0, 3], DType::F32, dev).unwrap()),
        ("f16.transposed", Tensor::randn(&[3, 2], 5, DType::F16, dev).unwrap().t().unwrap()),
        ("bf16.narrowed", Tensor::randn(&[5, 4], 6, DType::BF16, dev).unwrap().narrow(1, 1, 2).unwrap()),
        ("f64.permuted", Tensor::randn(&[2, 3, 4], 7, DType::F64, dev).unwrap().permute(&[2, 0, 1]).unwrap()),
        ("i64.extremes", Tensor::from_slice(&ints, &[2, 3], dev).unwrap()),
        ("i64.broadcast", Tensor::from_slice(&[3i64, -1, 9], &[3, 1], dev).unwrap().expand(&[3, 4]).unwrap()),
        ("u8.values", Tensor::from_slice(&[0u8, 1, 127, 128, 255, 9], &[3, 2], dev).unwrap().t().unwrap()),
        ("bool.mask", Tensor::from_slice(&[Bool8(1), Bool8(0), Bool8(0), Bool8(1)], &[2, 2], dev).unwrap()),
        ("bool.scalar", Tensor::from_slice(&[Bool8(1)], &[], dev).unwrap()),
    ])
}

#[test]
fn every_dtype_and_layout_round_trips_bit_for_bit() -> R {
    let dir = tempfile::tempdir()?;
    let path = dir.path().join("zoo.safetensors");
    let dev = Device::cpu();
    let tensors = zoo(&dev);
    assert!(tensors.iter().any(|(_, t)| !t.is_contiguous()), "the zoo must hold views");
    assert_eq!(DType::ALL.len(), 7);
    for d in DType::ALL {
        assert!(tensors.iter().any(|(_, t)| t.dtype() == d), "no {d} tensor in the zoo");
    }
    save(&path, &tensors, None)?;

    let loaded: HashMap<String, Tensor> = load(&path, &dev)?.into_iter().collect();
    assert_eq!(loaded.len(), tensors.len());
    for (name, want) in &tensors {
        let got = &loaded[name];
        assert_eq!(got.shape(), want.shape(), "{name}");
        assert_eq!(got.dtype(), want.dtype(), "{name}");
        assert!(got.is_contiguous(), "{name}");
        assert_eq!(le_bytes(got), le_bytes(want), "{name}");
    }
    Ok(())
}

#[test]
fn tensors_on_every_device_round_trip() -> R {
    let dir = tempfile::tempdir()?;
    for (i, dev) in Device::all().iter().enumerate() {
        let path = dir.path().join(format!("dev{i}.safetensors"));
        let src = named(vec![("w", Tensor::randn(&[3, 4], 11, DType::F32, dev)?.t()?), ("n", Tensor::from_slice(&[5i64], &[], dev)?)]);
        save(&path, &src, None)?;
        for (name, got) in load(&path, dev)? {
            let want = &src.iter().find(|(k, _)| *k == name).unwrap().1;
            assert_eq!(got.device(), dev);
            assert_eq!(le_bytes(&got), le_bytes(want), "{name} on {dev}");
        }
    }
    Ok(())
}

#[test]
fn the_safetensors_crate_reads_our_files() -> R {
    let dir = tempfile::tempdir()?;
    let path = dir.path().join("zoo.safetensors");
    let tensors = zoo(&Device::cpu());
    let meta = HashMap::from([("format".to_string(), "pt".to_string()), ("epoch".to_string(), "3".to_string())]);
    save(&path, &tensors, Some(meta.clone()))?;

    let bytes = fs::read(&path)?;
    let header_len = u64::from_le_bytes(bytes[..8].try_into()?) as usize;
    assert_eq!(header_len % 8, 0, "the data section must start 8-byte aligned");
    let (_, file_meta) = safetensors::SafeTensors::read_metadata(&bytes)?;
    assert_eq!(file_meta.metadata().as_ref(), Some(&meta));
    let st = safetensors::SafeTensors::deserialize(&bytes)?;
    assert_eq!(st.len(), tensors.len());
    for (name, t) in &tensors {
        let view = st.tensor(name)?;
        let want_dtype = match t.dtype() {
            DType::F32 => "F32",
            DType::F16 => "F16",
            DType::BF16 => "BF16",
            DType::F64 => "F64",
            DType::I64 => "I64",
            DType::U8 => "U8",
            DType::Bool => "BOOL",
        };
        assert_eq!(view.dtype().to_string(), want_dtype, "{name}");
        assert_eq!(view.shape(), t.shape(), "{name}");
        assert_eq!(view.data(), &le_bytes(t)[..], "{name}");
    }
    // Every tensor starts at a multiple of its element size, as the safetensors writer arranges.
    for (name, t) in &tensors {
        let start = file_meta.info(name).unwrap().data_offsets.0;
        assert_eq!(start % t.dtype().size_in_bytes(), 0, "{name} is misaligned");
    }
    let (_, read_meta) = load_with_metadata(&path, &Device::cpu())?;
    assert_eq!(read_meta, meta);
    Ok(())
}

/// `torch_small.safetensors` comes from `make_torch_checkpoint.py`, next to it.
#[test]
fn pytorch_file_loads_with_exact_values() -> R {
    let dev = Device::cpu();
    let (tensors, meta) = load_with_metadata(data("torch_small.safetensors"), &dev)?;
    assert_eq!(meta, HashMap::from([("format".to_string(), "pt".to_string())]));
    let t: HashMap<String, Tensor> = tensors.into_iter().collect();
    assert_eq!(t.len(), 4);
    assert_eq!(t["fc.weight"].shape(), &[2, 3]);
    assert_eq!(t["fc.weight"].to_vec::<f32>()?, vec![0.0, 1.0, 2.0, 3.0, 4.0, 5.0]);
    assert_eq!(t["fc.bias"].to_vec::<f32>()?, vec![0.5, -1.0]);
    assert_eq!(t["bn.num_batches_tracked"].shape(), &[] as &[usize]);
    assert_eq!(t["bn.num_batches_tracked"].to_vec::<i64>()?, vec![3]);
    assert_eq!(t["emb.weight"].dtype(), DType::F16);
    assert_eq!(t["emb.weight"].shape(), &[2, 2]);
    assert_eq!(t["emb.weight"].to_vec_f64()?, vec![0.0, 1.0, 2.0, 3.0]);
    Ok(())
}

/// Saving what we loaded from PyTorch's writer gives back its bytes exactly: same order, same
/// header, same padding.
#[test]
fn our_bytes_equal_pytorchs_for_the_same_tensors() -> R {
    let dir = tempfile::tempdir()?;
    let (tensors, meta) = load_with_metadata(data("torch_small.safetensors"), &Device::cpu())?;
    let path = dir.path().join("again.safetensors");
    save(&path, &tensors, Some(meta))?;
    assert_eq!(fs::read(&path)?, fs::read(data("torch_small.safetensors"))?);
    Ok(())
}

#[test]
fn integer_dtypes_liandan_lacks_widen_to_i64() -> R {
    let t: HashMap<String, Tensor> = load(data("torch_widen.safetensors"), &Device::cpu())?.into_iter().collect();
    let ints = |k: &str| {
        assert_eq!(t[k].dtype(), DType::I64, "{k}");
        t[k].to_vec::<i64>().unwrap()
    };
    assert_eq!(ints("i8"), vec![-128, 0, 127]);
    assert_eq!(ints("i16"), vec![-32768, 1, 32767]);
    assert_eq!(ints("i32"), vec![-2147483648, 2, 3, 2147483647]);
    assert_eq!(t["i32"].shape(), &[2, 2]);
    assert_eq!(ints("u16"), vec![0, 65535]);
    assert_eq!(ints("u32"), vec![0, 4294967295]);
    assert_eq!(t["u8"].to_vec::<u8>()?, vec![0, 255, 7]);
    assert_eq!(t["mask"].dtype(), DType::Bool);
    assert_eq!(t["mask"].to_vec::<Bool8>()?, vec![Bool8(1), Bool8(0), Bool8(1)]);
    Ok(())
}

// ---- state dicts ------------------------------------------------------------------------------

fn model(dev: &Device) -> Vec<(String, Tensor)> {
    named(vec![
        ("fc.weight", Tensor::zeros(&[2, 3], DType::F32, dev).unwrap()),
        ("fc.bias", Tensor::zeros(&[2], DType::F32, dev).unwrap()),
        ("bn.num_batches_tracked", Tensor::zeros(&[], DType::I64, dev).unwrap()),
        ("emb.weight", Tensor::zeros(&[2, 2], DType::F16, dev).unwrap()),
    ])
}

#[test]
fn strict_load_of_pytorchs_file_fills_the_model() -> R {
    let dev = Device::cpu();
    let m = model(&dev);
    let report = load_state_dict(&m, load(data("torch_small.safetensors"), &dev)?, true)?;
    assert!(report.is_complete());
    assert_eq!(report.loaded, vec!["fc.weight", "fc.bias", "bn.num_batches_tracked", "emb.weight"]);
    // The model's own handles see the values.
    assert_eq!(m[0].1.to_vec::<f32>()?, vec![0.0, 1.0, 2.0, 3.0, 4.0, 5.0]);
    assert_eq!(m[1].1.to_vec::<f32>()?, vec![0.5, -1.0]);
    assert_eq!(m[2].1.to_vec::<i64>()?, vec![3]);
    assert_eq!(m[3].1.to_vec_f64()?, vec![0.0, 1.0, 2.0, 3.0]);
    Ok(())
}

fn mismatched_file(dev: &Device) -> Vec<(String, Tensor)> {
    named(vec![
        ("fc.weight", Tensor::ones(&[3, 3], DType::F32, dev).unwrap()),
        ("fc.bias", Tensor::from_slice(&[7.0f32, 8.0], &[2], dev).unwrap()),
        ("head.weight", Tensor::ones(&[1], DType::F32, dev).unwrap()),
        ("emb.weight", Tensor::ones(&[2, 2], DType::F16, dev).unwrap()),
    ])
}

#[test]
fn strict_mismatch_lists_everything_and_assigns_nothing() {
    let dev = Device::cpu();
    let m = model(&dev);
    let err = load_state_dict(&m, mismatched_file(&dev), true).unwrap_err();
    let Error::StateDict { missing, unexpected, mismatched } = &err else { panic!("wrong error: {err}") };
    assert_eq!(missing, &["bn.num_batches_tracked"]);
    assert_eq!(unexpected, &["head.weight"]);
    assert_eq!(mismatched, &[SizeMismatch { key: "fc.weight".into(), expected: vec![2, 3], found: vec![3, 3] }]);
    let msg = err.to_string();
    assert!(msg.contains("Missing key(s) in state_dict: \"bn.num_batches_tracked\"."), "{msg}");
    assert!(msg.contains("Unexpected key(s) in state_dict: \"head.weight\"."), "{msg}");
    assert!(msg.contains("size mismatch for fc.weight: copying a param with shape [3, 3] from checkpoint, the shape in current model is [2, 3]."), "{msg}");
    // fc.bias and emb.weight matched, but strict loading changed nothing.
    for (k, t) in &m {
        assert!(t.to_vec_f64().unwrap().iter().all(|&v| v == 0.0), "{k} was assigned");
    }
}

#[test]
fn non_strict_load_assigns_what_matches_and_reports_the_rest() -> R {
    let dev = Device::cpu();
    let m = model(&dev);
    let report = load_state_dict(&m, mismatched_file(&dev), false)?;
    assert!(!report.is_complete());
    assert_eq!(report.loaded, vec!["fc.bias", "emb.weight"]);
    assert_eq!(report.missing, vec!["bn.num_batches_tracked"]);
    assert_eq!(report.unexpected, vec!["head.weight"]);
    assert_eq!(report.mismatched, vec![SizeMismatch { key: "fc.weight".into(), expected: vec![2, 3], found: vec![3, 3] }]);
    assert_eq!(m[0].1.to_vec::<f32>()?, vec![0.0; 6], "a mismatched key must not be assigned");
    assert_eq!(m[1].1.to_vec::<f32>()?, vec![7.0, 8.0]);
    assert_eq!(m[3].1.to_vec_f64()?, vec![1.0; 4]);
    Ok(())
}

#[test]
fn load_converts_to_the_models_dtype() -> R {
    let dir = tempfile::tempdir()?;
    let path = dir.path().join("mixed.safetensors");
    let dev = Device::cpu();
    let w64 = [0.1f64, -2.25, 3.5e-3, 1e10];
    let w16 = [0.5f64, -1.0, 65504.0, 6.1035156e-5];
    save(
        &path,
        &named(vec![
            ("a", Tensor::from_slice(&w64, &[2, 2], &dev)?),
            ("b", Tensor::from_f64s(&w16, &[4], DType::F16, &dev)?),
            ("steps", Tensor::from_slice(&[12i64], &[], &dev)?),
        ]),
        None,
    )?;
    let m = named(vec![
        ("a", Tensor::zeros(&[2, 2], DType::F32, &dev)?),
        ("b", Tensor::zeros(&[4], DType::F32, &dev)?),
        ("steps", Tensor::zeros(&[], DType::F64, &dev)?),
    ]);
    assert!(load_state_dict(&m, load(&path, &dev)?, true)?.is_complete());
    assert_eq!(m[0].1.dtype(), DType::F32);
    assert_eq!(m[0].1.to_vec::<f32>()?, w64.iter().map(|&v| v as f32).collect::<Vec<_>>());
    assert_eq!(m[1].1.to_vec::<f32>()?, w16.iter().map(|&v| half::f16::from_f64(v).to_f32()).collect::<Vec<_>>());
    assert_eq!(m[2].1.to_vec::<f64>()?, vec![12.0]);
    Ok(())
}

#[test]
fn tied_keys_are_each_assigned_and_duplicate_loaded_keys_are_refused() -> R {
    let dev = Device::cpu();
    let (a, b) = (Tensor::zeros(&[2], DType::F32, &dev)?, Tensor::zeros(&[2], DType::F32, &dev)?);
    let m = named(vec![("w", a.clone()), ("w", b.clone())]);
    let file = named(vec![("w", Tensor::from_slice(&[1.0f32, 2.0], &[2], &dev)?)]);
    load_state_dict(&m, file.clone(), true)?;
    assert_eq!(a.to_vec::<f32>()?, vec![1.0, 2.0]);
    assert_eq!(b.to_vec::<f32>()?, vec![1.0, 2.0]);

    let twice = [file.clone(), file].concat();
    let err = load_state_dict(&m, twice, false).unwrap_err();
    assert!(matches!(err, Error::DuplicateKey { ref key } if key == "w"), "{err}");
    Ok(())
}

#[test]
fn a_view_in_the_model_is_refused_before_anything_is_assigned() -> R {
    let dev = Device::cpu();
    let base = Tensor::zeros(&[2, 3], DType::F32, &dev)?;
    let ok = Tensor::zeros(&[2], DType::F32, &dev)?;
    let m = named(vec![("a", ok.clone()), ("view", base.t()?)]);
    let file = named(vec![("a", Tensor::ones(&[2], DType::F32, &dev)?), ("view", Tensor::ones(&[3, 2], DType::F32, &dev)?)]);
    let err = load_state_dict(&m, file, false).unwrap_err();
    assert!(err.to_string().contains("`view`"), "{err}");
    assert_eq!(ok.to_vec::<f32>()?, vec![0.0, 0.0]);
    Ok(())
}

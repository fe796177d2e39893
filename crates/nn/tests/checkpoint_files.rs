//! Checkpoint files that go wrong: broken, truncated and foreign files must give errors, never
//! panics; saves must be atomic.

use std::fs;
use std::path::{Path, PathBuf};

use liandan_nn::checkpoint::{load, save};
use liandan_nn::Error;
use liandan_nn::{DType, Device, Tensor};

type R = Result<(), Box<dyn std::error::Error>>;

fn good_file() -> Vec<u8> {
    fs::read(Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/torch_small.safetensors")).unwrap()
}

/// A file with header `json` (padded to 8 bytes) and `data` after it.
fn with_header(json: &str, data: &[u8]) -> Vec<u8> {
    let mut header = json.as_bytes().to_vec();
    header.resize(header.len().next_multiple_of(8), b' ');
    let mut out = (header.len() as u64).to_le_bytes().to_vec();
    out.extend(header);
    out.extend_from_slice(data);
    out
}

fn load_bytes(dir: &Path, name: &str, bytes: &[u8]) -> (PathBuf, Result<Vec<(String, Tensor)>, Error>) {
    let path = dir.join(name);
    fs::write(&path, bytes).unwrap();
    let got = load(&path, &Device::cpu());
    (path, got)
}

/// Every broken file gives a `Format` error whose message names the file and says `expect`.
#[test]
fn broken_files_give_format_errors_that_name_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let good = good_file();
    let header_len = u64::from_le_bytes(good[..8].try_into().unwrap()) as usize;
    let mut png = b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\x00\x00\x00\x10\x00\x00\x00\x10\x08\x06\x00\x00\x00".to_vec();
    png.extend([0u8; 64]);
    let mut huge_len = good.clone();
    huge_len[..8].copy_from_slice(&u64::MAX.to_le_bytes());
    let mut past_eof = good.clone();
    past_eof[..8].copy_from_slice(&(good.len() as u64).to_le_bytes());
    let mut non_utf8 = with_header("{}", &[]);
    non_utf8[8] = 0xff;
    let mut trailing = good.clone();
    trailing.extend([0u8; 4]);

    let f32_entry = |name: &str, shape: &str, a: usize, b: usize| format!(r#""{name}":{{"dtype":"F32","shape":{shape},"data_offsets":[{a},{b}]}}"#);
    let cases: Vec<(&str, Vec<u8>, &str)> = vec![
        ("empty", vec![], "0 bytes long"),
        ("three_bytes", vec![1, 2, 3], "3 bytes long"),
        ("truncated_in_header", good[..8 + header_len / 2].to_vec(), "header length"),
        ("truncated_in_data", good[..good.len() - 4].to_vec(), "truncated"),
        ("header_past_eof", past_eof, "header length"),
        ("header_len_u64_max", huge_len, "header length"),
        ("png", png, "header length"),
        ("non_utf8_header", non_utf8, "UTF-8"),
        ("invalid_json", with_header("{not json", &[]), "not a valid safetensors header"),
        ("json_array", with_header("[1, 2]", &[]), "not a valid safetensors header"),
        ("missing_fields", with_header(r#"{"w":{"dtype":"F32"}}"#, &[0; 4]), "not a valid safetensors header"),
        ("unknown_dtype", with_header(r#"{"w":{"dtype":"F128","shape":[1],"data_offsets":[0,16]}}"#, &[0; 16]), "F128"),
        ("negative_offset", with_header(r#"{"w":{"dtype":"F32","shape":[1],"data_offsets":[-4,0]}}"#, &[]), "not a valid"),
        ("metadata_not_strings", with_header(r#"{"__metadata__":{"epoch":3}}"#, &[]), "not a valid"),
        ("offsets_out_of_range", with_header(&format!("{{{}}}", f32_entry("w", "[100]", 0, 400)), &[0; 8]), "truncated"),
        ("offsets_overlap", with_header(&format!("{{{},{}}}", f32_entry("a", "[2]", 0, 8), f32_entry("b", "[2]", 4, 12)), &[0; 12]), "invalid offset"),
        ("offsets_gap", with_header(&format!("{{{},{}}}", f32_entry("a", "[2]", 0, 8), f32_entry("b", "[2]", 12, 20)), &[0; 20]), "invalid offset"),
        ("offsets_reversed", with_header(&format!("{{{}}}", f32_entry("w", "[0]", 8, 0)), &[0; 8]), "invalid offset"),
        ("shape_size_mismatch", with_header(&format!("{{{}}}", f32_entry("w", "[3]", 0, 8)), &[0; 8]), "invalid shape"),
        ("shape_size_mismatch_named", with_header(&format!("{{{}}}", f32_entry("w", "[3]", 0, 8)), &[0; 8]), "`w`: shape [3] of F32 needs 12 bytes"),
        // Empty tensors whose later dims overflow every stride: safetensors meets the 0 first
        // and accepts them; building the tensor panicked in `contiguous_strides` before.
        ("zero_then_huge_dims", with_header(&format!("{{{}}}", f32_entry("w", "[0, 4294967296, 4294967296]", 0, 0)), &[]), "`w`: load: shape"),
        ("zero_then_past_isize_max", with_header(&format!("{{{}}}", f32_entry("w", "[0, 2, 4611686018427387904]", 0, 0)), &[]), "too large"),
        ("zero_then_past_usize_max", with_header(&format!("{{{}}}", f32_entry("w", "[0, 3, 6148914691236517206]", 0, 0)), &[]), "too large"),
        ("huge_dims_then_zero", with_header(&format!("{{{}}}", f32_entry("w", "[4294967296, 4294967296, 0]", 0, 0)), &[]), "`w`"),
        ("just_past_usize_max", with_header(&format!("{{{}}}", f32_entry("w", "[3, 6148914691236517206]", 0, 0)), &[]), "`w`"),
        ("shape_overflow", with_header(&format!("{{{}}}", f32_entry("w", "[4294967296, 4294967296, 4294967296]", 0, 8)), &[0; 8]), "overflow"),
        ("trailing_bytes", trailing, "follow the last tensor"),
    ];
    for (name, bytes, expect) in cases {
        let (path, got) = load_bytes(dir.path(), &format!("{name}.safetensors"), &bytes);
        let err = match got {
            Ok(t) => panic!("{name}: loaded {} tensors from a broken file", t.len()),
            Err(e) => e,
        };
        let msg = err.to_string();
        println!("{name}: {msg}");
        assert!(matches!(err, Error::Format { .. }), "{name}: wrong variant: {msg}");
        assert!(msg.starts_with(&path.display().to_string()), "{name}: message does not name the file: {msg}");
        assert!(msg.contains(expect), "{name}: message lacks {expect:?}: {msg}");
    }
}

#[test]
fn a_directory_and_a_missing_file_are_errors() {
    let dir = tempfile::tempdir().unwrap();
    let err = load(dir.path(), &Device::cpu()).unwrap_err();
    assert!(err.to_string().contains("directory"), "{err}");
    let missing = dir.path().join("nope.safetensors");
    let err = load(&missing, &Device::cpu()).unwrap_err();
    assert!(matches!(&err, Error::Io { source, .. } if source.kind() == std::io::ErrorKind::NotFound), "{err}");
    assert!(err.to_string().contains("nope.safetensors"), "{err}");
}

#[test]
fn dtypes_liandan_cannot_hold_are_refused_by_name() {
    let dir = tempfile::tempdir().unwrap();
    for dtype in ["F8_E4M3", "F8_E5M2", "C64", "U64"] {
        let bits = if dtype.starts_with("F8") { 1 } else { 8 };
        let json = format!(
            r#"{{"ok":{{"dtype":"F32","shape":[1],"data_offsets":[0,4]}},"odd":{{"dtype":"{dtype}","shape":[2],"data_offsets":[4,{}]}}}}"#,
            4 + 2 * bits
        );
        let (_, got) = load_bytes(dir.path(), "odd.safetensors", &with_header(&json, &vec![0; 4 + 2 * bits]));
        let err = got.unwrap_err();
        assert!(matches!(&err, Error::UnsupportedDType { name, .. } if name == "odd"), "{dtype}: {err}");
        let msg = err.to_string();
        assert!(msg.contains("`odd`") && msg.contains(dtype), "{msg}");
    }
}

/// Every prefix and every one-byte corruption of a real file: an error or a load, never a panic.
#[test]
fn no_truncation_or_byte_flip_panics() {
    let dir = tempfile::tempdir().unwrap();
    let good = good_file();
    for cut in 0..good.len() {
        let (_, got) = load_bytes(dir.path(), "cut.safetensors", &good[..cut]);
        assert!(got.is_err(), "a file cut at {cut} of {} bytes loaded", good.len());
    }
    for i in 0..good.len() {
        for flip in [0x01u8, 0x80, 0xff] {
            let mut bad = good.clone();
            bad[i] ^= flip;
            let _ = load_bytes(dir.path(), "flip.safetensors", &bad).1;
        }
    }
}

// ---- atomic saves -----------------------------------------------------------------------------

fn entries(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = fs::read_dir(dir).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).collect();
    names.sort();
    names
}

fn one(name: &str, value: f32) -> Vec<(String, Tensor)> {
    vec![(name.to_string(), Tensor::full(&[3], value as f64, DType::F32, &Device::cpu()).unwrap())]
}

#[test]
fn a_successful_save_leaves_no_temporary_file_and_replaces_the_old_one() -> R {
    let dir = tempfile::tempdir()?;
    let path = dir.path().join("model.safetensors");
    save(&path, &one("w", 1.0), None)?;
    assert_eq!(entries(dir.path()), vec!["model.safetensors"]);
    save(&path, &one("w", 2.0), None)?;
    assert_eq!(entries(dir.path()), vec!["model.safetensors"]);
    assert_eq!(load(&path, &Device::cpu())?[0].1.to_vec::<f32>()?, vec![2.0; 3]);
    Ok(())
}

#[test]
fn a_save_into_a_missing_directory_fails_and_leaves_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("no/such/dir/model.safetensors");
    let err = save(&path, &one("w", 1.0), None).unwrap_err();
    assert!(matches!(err, Error::Io { .. }), "{err}");
    assert!(err.to_string().contains("model.safetensors"), "{err}");
    assert!(entries(dir.path()).is_empty());
}

#[test]
fn a_refused_save_leaves_the_old_file_untouched() -> R {
    let dir = tempfile::tempdir()?;
    let path = dir.path().join("model.safetensors");
    save(&path, &one("w", 1.0), None)?;
    let before = fs::read(&path)?;
    let twice = [one("w", 5.0), one("w", 6.0)].concat();
    let err = save(&path, &twice, None).unwrap_err();
    assert!(matches!(err, Error::InvalidSave { .. }) && err.to_string().contains("`w`"), "{err}");
    let err = save(&path, &one("__metadata__", 5.0), None).unwrap_err();
    assert!(matches!(err, Error::InvalidSave { .. }), "{err}");
    assert_eq!(fs::read(&path)?, before);
    assert_eq!(entries(dir.path()), vec!["model.safetensors"]);
    Ok(())
}

#[test]
fn saving_onto_a_directory_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    fs::create_dir(dir.path().join("model.safetensors")).unwrap();
    let err = save(dir.path().join("model.safetensors"), &one("w", 1.0), None).unwrap_err();
    assert!(err.to_string().contains("directory"), "{err}");
    assert_eq!(entries(dir.path()), vec!["model.safetensors"]);
    assert!(dir.path().join("model.safetensors").is_dir());
}

/// The longest legal file name (255 bytes on Linux and macOS): the temporary file beside it
/// must not be named after it (that added about 12 bytes and failed with "File name too long").
#[test]
fn a_file_name_of_255_bytes_saves_and_loads() -> R {
    let dir = tempfile::tempdir()?;
    let name = format!("{}.safetensors", "m".repeat(255 - ".safetensors".len()));
    assert_eq!(name.len(), 255);
    let path = dir.path().join(&name);
    save(&path, &one("w", 3.0), None)?;
    assert_eq!(entries(dir.path()), vec![name]);
    assert_eq!(load(&path, &Device::cpu())?[0].1.to_vec::<f32>()?, vec![3.0; 3]);
    Ok(())
}

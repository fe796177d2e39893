//! Reading dataset files: IDX (raw and gzipped), CIFAR-10 batches and memory-mapped `.npy`
//! arrays; every kind of bad input answered by an error naming the file; a short fuzz run.

use std::io::Write;
use std::path::Path;

use liandan_backend_cpu as _;
use liandan_train::data::fuzz::{self, Format};
use liandan_train::data::{cifar10, parse_idx, DataLoader, Dataset, Mnist, NpyDataset, Split, Synthetic};
use liandan_train::nn::Device;

fn idx(dims: &[u32], data: &[u8]) -> Vec<u8> {
    let mut b = vec![0, 0, 8, dims.len() as u8];
    dims.iter().for_each(|d| b.extend_from_slice(&d.to_be_bytes()));
    b.extend_from_slice(data);
    b
}

fn gz(bytes: &[u8]) -> Vec<u8> {
    let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    e.write_all(bytes).unwrap();
    e.finish().unwrap()
}

fn err_of<T>(r: liandan_train::Result<T>) -> String {
    match r {
        Ok(_) => panic!("expected an error"),
        Err(e) => e.to_string(),
    }
}

#[test]
fn mnist_from_raw_and_gzipped_files() {
    let dir = tempfile::tempdir().unwrap();
    let pixels: Vec<u8> = (0..3 * 2 * 2).map(|i| i as u8).collect();
    std::fs::write(dir.path().join("t10k-images-idx3-ubyte"), idx(&[3, 2, 2], &pixels)).unwrap();
    std::fs::write(dir.path().join("t10k-labels-idx1-ubyte.gz"), gz(&idx(&[3], &[7, 1, 4]))).unwrap();
    let ds = Mnist::load(dir.path(), Split::Test).unwrap();
    assert_eq!(ds.len(), 3);
    let s = ds.get(2).unwrap();
    assert_eq!((s.shape.as_slice(), s.target), (&[1usize, 2, 2][..], 4));
    assert_eq!(s.input, vec![8.0, 9.0, 10.0, 11.0]);

    let msg = err_of(Mnist::load(dir.path(), Split::Train));
    assert!(msg.contains("train-images-idx3-ubyte"), "{msg}");
    let msg = err_of(Mnist::load(&dir.path().join("nope"), Split::Test));
    assert!(msg.contains("nope") && msg.contains("no such directory"), "{msg}");

    // Counts that disagree.
    std::fs::write(dir.path().join("t10k-labels-idx1-ubyte.gz"), gz(&idx(&[2], &[7, 1]))).unwrap();
    let msg = err_of(Mnist::load(dir.path(), Split::Test));
    assert!(msg.contains("t10k-labels") && msg.contains("3 images"), "{msg}");
}

#[test]
fn bad_idx_files_are_errors_naming_the_file() {
    let p = Path::new("dir/images.idx");
    let good = idx(&[2, 2], &[1, 2, 3, 4]);
    for (bytes, want) in [
        (good[..good.len() - 1].to_vec(), "truncated"),
        (good[..6].to_vec(), "truncated or not an IDX"),
        ([&[1u8, 2, 3, 4][..], &good[4..]].concat(), "magic"),
        ([&good[..], &[9]].concat(), "more data follows"),
        (idx(&[u32::MAX, u32::MAX], &[1]), "more data than a file of this size"),
        (vec![0, 0, 0x0d, 1, 0, 0, 0, 1, 0, 0, 0, 0], "element type"),
        (gz(&good)[..20].to_vec(), "truncated"),
    ] {
        let msg = err_of(parse_idx(&bytes, p));
        assert!(msg.contains("dir/images.idx") && msg.contains(want), "{want}: {msg}");
    }
    assert_eq!(parse_idx(&gz(&good), p).unwrap().data, vec![1, 2, 3, 4]);
}

#[test]
fn cifar_batches_and_their_errors() {
    let dir = tempfile::tempdir().unwrap();
    let record = |label: u8| [&[label][..], &vec![label * 10; 3072]].concat();
    std::fs::write(dir.path().join("test_batch.bin"), [record(3), record(9)].concat()).unwrap();
    let ds = cifar10(dir.path(), Split::Test).unwrap();
    assert_eq!(ds.len(), 2);
    let s = ds.get(1).unwrap();
    assert_eq!((s.shape.as_slice(), s.target, s.input[3071]), (&[3usize, 32, 32][..], 9, 90.0));
    let msg = err_of(cifar10(dir.path(), Split::Train));
    assert!(msg.contains("data_batch_1.bin"), "{msg}");
    std::fs::write(dir.path().join("test_batch.bin"), &record(3)[..3000]).unwrap();
    let msg = err_of(cifar10(dir.path(), Split::Test));
    assert!(msg.contains("test_batch.bin") && msg.contains("3073"), "{msg}");
    std::fs::write(dir.path().join("test_batch.bin"), record(12)).unwrap();
    assert!(err_of(cifar10(dir.path(), Split::Test)).contains("label 12"));
}

/// An `.npy` file as numpy.save writes it (format 1.0).
fn npy(descr: &str, shape: &str, data: &[u8]) -> Vec<u8> {
    let header = format!("{{'descr': '{descr}', 'fortran_order': False, 'shape': {shape}, }}");
    let padded = format!("{header:<width$}\n", width = (header.len() + 11).div_ceil(64) * 64 - 11);
    let mut b = b"\x93NUMPY\x01\x00".to_vec();
    b.extend_from_slice(&(padded.len() as u16).to_le_bytes());
    b.extend_from_slice(padded.as_bytes());
    b.extend_from_slice(data);
    b
}

#[test]
fn npy_dataset_reads_rows_of_a_file_larger_than_the_working_set() {
    // 2,000 rows of [3, 16, 16] f32: 6 MB, read by a loader holding a few 16-row batches.
    let dir = tempfile::tempdir().unwrap();
    let (n, per) = (2000usize, 3 * 16 * 16);
    let values: Vec<u8> = (0..n * per).flat_map(|i| ((i % 1000) as f32 * 0.5).to_le_bytes()).collect();
    std::fs::write(dir.path().join("features.npy"), npy("<f4", "(2000, 3, 16, 16)", &values)).unwrap();
    let labels: Vec<u8> = (0..n as i64).flat_map(|i| (i % 10).to_le_bytes()).collect();
    std::fs::write(dir.path().join("labels.npy"), npy("<i8", "(2000,)", &labels)).unwrap();
    let ds = NpyDataset::open(dir.path()).unwrap();
    assert_eq!(ds.len(), n);
    let loader = DataLoader::new(ds, 16, &Device::cpu()).unwrap().shuffle(1).prefetch(1);
    let mut seen = 0;
    for b in loader.iter(0).unwrap() {
        let b = b.unwrap();
        let x = b.input.to_vec::<f32>().unwrap();
        let t = b.target.to_vec::<i64>().unwrap();
        // Row r's first value is (r * per % 1000) / 2 and its label r % 10; check they agree.
        for (k, &label) in t.iter().enumerate() {
            let first = x[k * per];
            assert!((0..n).any(|r| r as i64 % 10 == label && ((r * per % 1000) as f32 * 0.5) == first));
        }
        seen += t.len();
    }
    assert_eq!(seen, n);

    // f16 and u8 features, u8 labels.
    let f16s: Vec<u8> = [1.5f32, -2.0].iter().flat_map(|&v| half::f16::from_f32(v).to_le_bytes()).collect();
    std::fs::write(dir.path().join("features.npy"), npy("<f2", "(2, 1)", &f16s)).unwrap();
    std::fs::write(dir.path().join("labels.npy"), npy("|u1", "(2,)", &[4, 5])).unwrap();
    let s = NpyDataset::open(dir.path()).unwrap().get(1).unwrap();
    assert_eq!((s.input, s.target), (vec![-2.0], 5));
    std::fs::write(dir.path().join("features.npy"), npy("|u1", "(2, 2)", &[1, 2, 3, 250])).unwrap();
    assert_eq!(NpyDataset::open(dir.path()).unwrap().get(1).unwrap().input, vec![3.0, 250.0]);
}

#[test]
fn bad_npy_files_are_errors_naming_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let f = dir.path().join("features.npy");
    let l = dir.path().join("labels.npy");
    std::fs::write(&l, npy("<i8", "(2,)", &[0; 16])).unwrap();
    for (bytes, want) in [
        (npy("<f4", "(2, 3)", &[0; 20]), "truncated"),
        (npy("<f8", "(2, 3)", &[0; 48]), "unsupported dtype"),
        (npy(">f4", "(2, 3)", &[0; 24]), "unsupported dtype"),
        (npy("<f4", "(99999999999, 99999999999, 99999999999)", &[0; 24]), "overflows"),
        (b"PK\x03\x04 not numpy".to_vec(), "magic"),
        (npy("<f4", "(3, 2)", &[0; 24]), "labels must be [N]"),
    ] {
        std::fs::write(&f, bytes).unwrap();
        let msg = err_of(NpyDataset::open(dir.path()));
        assert!(msg.contains(".npy") && msg.contains(want), "{want}: {msg}");
    }
    std::fs::write(&f, npy("<f4", "(2, 3)", &[0; 24])).unwrap();
    std::fs::write(&l, npy("<f4", "(2,)", &[0; 8])).unwrap();
    assert!(err_of(NpyDataset::open(dir.path())).contains("labels are F32"));
    std::fs::remove_file(&l).unwrap();
    assert!(err_of(NpyDataset::open(dir.path())).contains("labels.npy"));
}

#[test]
fn synthetic_data_is_seeded() {
    let a = Synthetic::new(10, &[3, 4, 4], 10, 1).unwrap();
    let b = Synthetic::new(10, &[3, 4, 4], 10, 2).unwrap();
    assert_eq!(a.get(3).unwrap(), a.get(3).unwrap());
    assert_ne!(a.get(3).unwrap().input, b.get(3).unwrap().input);
    assert!(a.get(10).is_err());
}

#[test]
fn parsers_never_panic_on_mutated_input() {
    let scratch = tempfile::tempdir().unwrap();
    for format in Format::ALL {
        let cases = if format == Format::Safetensors { 1000 } else { 3000 };
        let report = fuzz::fuzz(format, cases, 0xf022, scratch.path());
        assert!(report.panics.is_empty(), "{:?}", report.panics);
        // Mutations must exercise both answers, or the fuzzer tests nothing.
        assert!(report.accepted > 0 && report.rejected > cases / 2, "{format:?}: {report:?}");
    }
}

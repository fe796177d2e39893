//! Mutation fuzzing of the data parsers and the safetensors checkpoint reader: random
//! truncations, byte flips, and header mutations with huge sizes and offsets. A parser may
//! answer any input with an error; it must never panic. `cargo xtask fuzz` runs many cases,
//! the tests a few thousand.

use std::io::Write;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::Path;

use liandan_tensor::{DType, Device, Tensor};

use super::{parse_cifar, parse_idx, parse_npy, rng};

/// The inputs fuzzed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    Idx,
    IdxGz,
    Cifar,
    Npy,
    Safetensors,
}

impl Format {
    pub const ALL: [Format; 5] = [Format::Idx, Format::IdxGz, Format::Cifar, Format::Npy, Format::Safetensors];
}

/// What a fuzzing run saw.
#[derive(Debug, Default)]
pub struct Report {
    pub cases: usize,
    /// Inputs parsed without error (mutations that kept the file valid).
    pub accepted: usize,
    /// Inputs answered with an error.
    pub rejected: usize,
    /// Panic messages, with the mutation that caused them; must stay empty.
    pub panics: Vec<String>,
}

/// A valid input of `format` to mutate.
pub fn seed_input(format: Format, scratch: &Path) -> Vec<u8> {
    match format {
        Format::Idx => idx_bytes(),
        Format::IdxGz => {
            let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
            gz.write_all(&idx_bytes()).expect("writing to memory");
            gz.finish().expect("writing to memory")
        }
        Format::Cifar => (0..2 * 3073).map(|i| if i % 3073 == 0 { (i / 3073) as u8 } else { i as u8 }).collect(),
        Format::Npy => {
            let header = "{'descr': '<f4', 'fortran_order': False, 'shape': (3, 4), }";
            let mut b = b"\x93NUMPY\x01\x00".to_vec();
            let padded = format!("{header:<117}\n"); // 10 + 118 = 128: numpy aligns data to 64 bytes
            b.extend_from_slice(&(padded.len() as u16).to_le_bytes());
            b.extend_from_slice(padded.as_bytes());
            b.extend((0..12).flat_map(|i| (i as f32).to_le_bytes()));
            b
        }
        Format::Safetensors => {
            let path = scratch.join("seed.safetensors");
            let dev = Device::cpu();
            let w = Tensor::arange(0.0, 6.0, 1.0, DType::F32, &dev).and_then(|t| t.reshape(&[2, 3])).expect("a small tensor on the CPU");
            let b = Tensor::arange(0.0, 3.0, 1.0, DType::I64, &dev).expect("a small tensor on the CPU");
            liandan_nn::checkpoint::save(&path, &[("w".into(), w), ("b".into(), b)], None).expect("writing the seed checkpoint");
            std::fs::read(&path).expect("reading the seed checkpoint back")
        }
    }
}

fn idx_bytes() -> Vec<u8> {
    let mut b = vec![0, 0, 8, 3];
    for d in [3u32, 4, 5] {
        b.extend_from_slice(&d.to_be_bytes());
    }
    b.extend((0..60).map(|i| i as u8));
    b
}

/// Case `case`'s mutation of `input`, drawn from stream `seed`.
pub fn mutate(input: &[u8], seed: u64, case: u64) -> Vec<u8> {
    let s = rng::derive(seed, case);
    let pick = |c: u32, n: usize| rng::below(s, c, n.max(1) as u64) as usize;
    let mut out = input.to_vec();
    let rounds = 1 + pick(0, 3);
    for r in 0..rounds as u32 {
        let c = 10 + r * 10;
        match pick(c, 5) {
            0 => out.truncate(pick(c + 1, out.len() + 1)),
            1 if !out.is_empty() => {
                let at = pick(c + 2, out.len());
                out[at] ^= 1 << pick(c + 3, 8);
            }
            2 if !out.is_empty() => {
                // A 4- or 8-byte field in the header region set to a huge or random value.
                let at = pick(c + 2, out.len().min(160));
                let value: [u8; 8] = match pick(c + 3, 3) {
                    0 => [0xff; 8],
                    1 => [0x7f, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f],
                    _ => (rng::below(s, c + 4, u64::MAX)).to_le_bytes(),
                };
                let n = (out.len() - at).min(if pick(c + 5, 2) == 0 { 4 } else { 8 });
                out[at..at + n].copy_from_slice(&value[..n]);
            }
            3 => {
                // A number in a text header (npy shape, safetensors offsets) made huge.
                let digits: Vec<usize> = (0..out.len().min(512)).filter(|&i| out[i].is_ascii_digit()).collect();
                if !digits.is_empty() {
                    let at = digits[pick(c + 2, digits.len())];
                    let huge: &[u8] = [b"18446744073709551615".as_slice(), b"9999999999", b"4294967296"][pick(c + 3, 3)];
                    out.splice(at..at + 1, huge.iter().copied());
                }
            }
            _ => {
                let at = pick(c + 2, out.len() + 1);
                out.insert(at, rng::below(s, c + 3, 256) as u8);
            }
        }
    }
    out
}

/// Parses `bytes` as `format`: true when accepted, false when rejected (with an error).
pub fn parse(format: Format, bytes: &[u8], scratch: &Path) -> bool {
    let name = Path::new("fuzz");
    match format {
        Format::Idx | Format::IdxGz => parse_idx(bytes, name).is_ok(),
        Format::Cifar => parse_cifar(bytes, name).is_ok(),
        Format::Npy => match parse_npy(bytes, name) {
            // Touch the last byte the header promises, as a dataset read would: indexing
            // panics if parse_npy let a header claim more data than the file holds.
            Ok(a) => {
                let n: usize = a.shape.iter().product();
                n == 0 || bytes[a.offset + n * a.dtype.size() - 1] == bytes[bytes.len() - 1]
            }
            Err(_) => false,
        },
        Format::Safetensors => {
            let path = scratch.join("case.safetensors");
            std::fs::write(&path, bytes).is_ok() && liandan_nn::checkpoint::load(&path, &Device::cpu()).is_ok()
        }
    }
}

/// Runs `cases` mutations of `format`'s seed input, catching panics (the panic hook still
/// prints them; `cargo xtask fuzz` silences it).
pub fn fuzz(format: Format, cases: usize, seed: u64, scratch: &Path) -> Report {
    let input = seed_input(format, scratch);
    let mut report = Report { cases, ..Report::default() };
    for case in 0..cases as u64 {
        let bytes = mutate(&input, seed, case);
        match catch_unwind(AssertUnwindSafe(|| parse(format, &bytes, scratch))) {
            Ok(true) => report.accepted += 1,
            Ok(false) => report.rejected += 1,
            Err(p) => {
                let msg = p.downcast_ref::<String>().cloned().or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string())).unwrap_or_default();
                report.panics.push(format!("{format:?} case {case} (seed {seed}): {msg}"));
            }
        }
    }
    report
}

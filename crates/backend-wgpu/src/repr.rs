//! How each dtype sits in GPU memory, and the WGSL prelude that lets one shader source serve
//! every dtype.
//!
//! | dtype | GPU element | computed in |
//! |---|---|---|
//! | f32 | `f32` | f32 |
//! | f16 | `f16` with SHADER_F16, else `f32` holding an f16-rounded value | f32, rounded on store |
//! | bf16 | at rest two to a `u32` word (`packed.rs`); inside an op `f32` holding a bf16-rounded value | f32, rounded to bf16 on every store |
//! | f64 | `f64` with SHADER_F64, else `vec2<u32>` words (Metal) | f64; without the feature, on the CPU |
//! | i64 | `vec2<u32>` (low, high words) | moved and compared here; arithmetic on the CPU |
//! | u8, bool | `u32` | moved and compared here; arithmetic on the CPU |
//!
//! Every kernel handles one element per invocation; sub-word stores (8- or 16-bit) would race
//! between neighbouring invocations, which is why the small integer types take a word, and why
//! packed bf16 is widened to words on its way into an op and packed on its way out (by kernels
//! that write whole words). What this module describes for bf16 is the widened form.

use std::borrow::Cow;

use liandan_tensor::DType;

/// What the device holds natively, and where a kernel finds its meta block: immediate data
/// (`var<immediate>`, with `Features::IMMEDIATES`) or a storage buffer at binding 0.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Repr {
    pub f16: bool,
    pub f64: bool,
    pub immediates: bool,
}

impl Repr {
    pub(crate) fn new(features: wgpu::Features) -> Repr {
        Repr {
            f16: features.contains(wgpu::Features::SHADER_F16),
            f64: features.contains(wgpu::Features::SHADER_F64),
            immediates: features.contains(wgpu::Features::IMMEDIATES),
        }
    }

    /// The declaration of a kernel's parameter block, `name` (`p` for most kernels) of the
    /// struct `Params` (`params.rs`): immediate data where the device takes a whole block so,
    /// else a storage buffer at binding 0.
    pub(crate) fn named_params(&self, name: &str) -> String {
        if self.immediates {
            format!("var<immediate> {name}: Params;\n")
        } else {
            format!("@group(0) @binding(0) var<storage, read> {name}: Params;\n")
        }
    }

    /// True when float kernels can compute on this dtype here.
    pub(crate) fn computes(&self, dtype: DType) -> bool {
        dtype.is_float() && (dtype != DType::F64 || self.f64)
    }

    /// The WGSL storage type of a dtype.
    pub(crate) fn storage_type(&self, dtype: DType) -> &'static str {
        match dtype {
            DType::F32 | DType::BF16 => "f32",
            DType::F16 if self.f16 => "f16",
            DType::F16 => "f32",
            DType::F64 if self.f64 => "f64",
            DType::F64 | DType::I64 => "vec2<u32>",
            DType::U8 | DType::Bool => "u32",
        }
    }

    /// Bytes one element occupies on the GPU.
    pub(crate) fn gpu_size(&self, dtype: DType) -> usize {
        match self.storage_type(dtype) {
            "f16" => 2,
            "f64" | "vec2<u32>" => 8,
            _ => 4,
        }
    }

    /// Buffer bytes for `numel` elements (at least 4, a multiple of 4), saturating at the
    /// largest multiple of 4 (which no device can allocate).
    pub(crate) fn buffer_bytes(&self, dtype: DType, numel: usize) -> u64 {
        (numel as u64).saturating_mul(self.gpu_size(dtype) as u64).max(4).checked_next_multiple_of(4).unwrap_or(u64::MAX / 4 * 4)
    }

    /// Host bytes in the tensor's dtype to GPU element bytes.
    /// (Borrowed where they agree, so that an f32 upload copies nothing extra.)
    pub(crate) fn host_to_gpu<'a>(&self, bytes: &'a [u8], dtype: DType) -> Cow<'a, [u8]> {
        let widen = |v: Vec<f32>| Cow::Owned(bytemuck::cast_slice(&v).to_vec());
        match dtype {
            DType::BF16 => widen(bytemuck::pod_collect_to_vec::<u8, half::bf16>(bytes).iter().map(|x| x.to_f32()).collect()),
            DType::F16 if !self.f16 => widen(bytemuck::pod_collect_to_vec::<u8, half::f16>(bytes).iter().map(|x| x.to_f32()).collect()),
            DType::U8 | DType::Bool => Cow::Owned(bytemuck::cast_slice(&bytes.iter().map(|&b| b as u32).collect::<Vec<u32>>()).to_vec()),
            _ => Cow::Borrowed(bytes),
        }
    }

    /// GPU element bytes (exactly `numel` elements) to host bytes in the tensor's dtype.
    pub(crate) fn gpu_to_host(&self, bytes: &[u8], dtype: DType) -> Vec<u8> {
        let narrow = || bytemuck::pod_collect_to_vec::<u8, f32>(bytes);
        match dtype {
            DType::BF16 => bytemuck::cast_slice(&narrow().iter().map(|&x| half::bf16::from_f32(x)).collect::<Vec<_>>()).to_vec(),
            DType::F16 if !self.f16 => bytemuck::cast_slice(&narrow().iter().map(|&x| half::f16::from_f32(x)).collect::<Vec<_>>()).to_vec(),
            DType::U8 | DType::Bool => bytemuck::pod_collect_to_vec::<u8, u32>(bytes).iter().map(|&x| x as u8).collect(),
            _ => bytes.to_vec(),
        }
    }

    /// The WGSL prelude for elements of `dtype` named `name`: the storage alias `S_name` and,
    /// for dtypes computed here, the compute alias `C_name` with `load_name(S) -> C` and
    /// `store_name(C) -> S` (which rounds to the dtype's precision), and `quantize_name(C) -> C`,
    /// the value rounded to the dtype's precision without leaving the compute type.
    pub(crate) fn prelude(&self, name: &str, dtype: DType) -> String {
        let s = self.storage_type(dtype);
        let mut out = format!("alias S_{name} = {s};\n");
        if !self.computes(dtype) {
            return out;
        }
        let c = if dtype == DType::F64 { "f64" } else { "f32" };
        out += &format!("alias C_{name} = {c};\nfn load_{name}(x: {s}) -> {c} {{ return {c}(x); }}\n");
        out += &match dtype {
            // Round to nearest even at bf16 precision, keeping NaN a NaN.
            DType::BF16 => format!("fn store_{name}(x: f32) -> f32 {{\n  if (!(x == x)) {{ return x; }}\n  let b = bitcast<u32>(x);\n  return bitcast<f32>((b + 0x7fffu + ((b >> 16u) & 1u)) & 0xffff0000u);\n}}\n"),
            DType::F16 if !self.f16 => format!("fn store_{name}(x: f32) -> f32 {{ return unpack2x16float(pack2x16float(vec2<f32>(x, 0.0))).x; }}\n"),
            _ => format!("fn store_{name}(x: {c}) -> {s} {{ return {s}(x); }}\n"),
        };
        out += &match dtype {
            // Round to nearest even at f16 precision by scaling with powers of two: exact f32
            // arithmetic that a driver cannot fold away. (On the H200 a round trip through the
            // f16 type inside one kernel did not round as a store does.)
            // Quanta: 2^(e - 10) for exponent e, 2^-24 for f16 subnormals; 65520 and up overflow.
            DType::F16 => format!(
                "fn quantize_{name}(x: f32) -> f32 {{\n  let a = abs(x);\n  if (!(a < 65520.0)) {{ return select(x, bitcast<f32>((bitcast<u32>(x) & 0x80000000u) | 0x7f800000u), a == a); }}\n  \
                 let e = max(i32((bitcast<u32>(a) >> 23u) & 0xffu) - 127, -14) - 10;\n  \
                 let r = round(a * bitcast<f32>(u32(127 - e) << 23u)) * bitcast<f32>(u32(127 + e) << 23u);\n  \
                 return bitcast<f32>(bitcast<u32>(r) | (bitcast<u32>(x) & 0x80000000u));\n}}\n"
            ),
            DType::BF16 => format!("fn quantize_{name}(x: f32) -> f32 {{ return store_{name}(x); }}\n"),
            _ => format!("fn quantize_{name}(x: {c}) -> {c} {{ return x; }}\n"),
        };
        out
    }

    /// `enable` directives a shader touching these dtypes needs.
    pub(crate) fn enables(&self, dtypes: &[DType]) -> String {
        if self.f16 && dtypes.contains(&DType::F16) {
            "enable f16;\n".into()
        } else {
            String::new()
        }
    }
}

//! The CPU backend's one setting, parsed once (see `liandan_tensor::settings`).

use std::sync::OnceLock;

use liandan_tensor::settings::{env, Kind, Setting, SettingError, Vars};
use liandan_tensor::Result;

/// This crate's settings.
pub const SETTINGS: &[Setting] = &[GEMM];

pub const GEMM: Setting = Setting {
    name: "LIANDAN_CPU_GEMM",
    kind: Kind::Choice(&["gemm", "tuned", "matrixmultiply"]),
    default: "gemm",
    doc: "The CPU's matrix products: `gemm` (the `gemm` crate, the same way for the same shape on every run), `tuned` (per shape, the \
          fastest of `gemm` and `matrixmultiply` timed on this CPU; not reproducible bit for bit between processes) or `matrixmultiply` \
          (every product, to bisect a wrong result to the `gemm` crate).",
    owner: "liandan-backend-cpu",
};

/// The gemm library the products run on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Engine {
    /// The `gemm` crate, threaded on rayon, with a fixed rule for the products with few rows
    /// against a transposed rhs (see `matmul::gemm_one`): the same way for the same shape on every
    /// run, so a resumed training run matches an uninterrupted one bit for bit.
    Gemm,
    /// Per product shape, the fastest of the ways below (`matmul::Way`), timed on the shape's first
    /// calls in this process: which one wins depends on the CPU (on an AMD EPYC `gemm` into a
    /// column-major block wins the few-row products by
    /// 1.6-2.9x, on an Intel Xeon `matrixmultiply` wins most of those with 64 rows or more by
    /// 1.1-1.8x). The ways round differently in the last bits and the timing picks differently
    /// from run to run, so results are not bit-for-bit reproducible between processes.
    Tuned,
    /// `matrixmultiply`, AVX2 at most, on its own threads: kept to compare and to bisect.
    MatrixMultiply,
}

/// The options of this crate, as the environment sets them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct CpuOptions {
    pub(crate) gemm: Engine,
}

impl CpuOptions {
    pub(crate) fn from_vars(vars: Vars) -> std::result::Result<CpuOptions, SettingError> {
        let gemm = match GEMM.choice_in(vars)? {
            Some("tuned") => Engine::Tuned,
            Some("matrixmultiply") => Engine::MatrixMultiply,
            _ => Engine::Gemm,
        };
        Ok(CpuOptions { gemm })
    }
}

/// This process's options, read from the environment once; a bad value fails every product.
pub(crate) fn options() -> Result<CpuOptions> {
    static OPTIONS: OnceLock<std::result::Result<CpuOptions, SettingError>> = OnceLock::new();
    Ok(OPTIONS.get_or_init(|| CpuOptions::from_vars(&env)).clone()?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_setting_rejects_a_bad_value_naming_itself() {
        liandan_tensor::settings::assert_bad_values_named(SETTINGS, CpuOptions::from_vars);
        let tuned = |n: &str| (n == GEMM.name).then(|| std::ffi::OsString::from("Tuned"));
        assert_eq!(CpuOptions::from_vars(&tuned).unwrap().gemm, Engine::Tuned);
    }
}

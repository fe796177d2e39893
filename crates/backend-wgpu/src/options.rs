//! The wgpu backend's options: the settings it reads from the environment ([`SETTINGS`]),
//! parsed once into a [`WgpuOptions`] per device, which a program may replace on a device
//! ([`WgpuBackend::set_options`](crate::WgpuBackend::set_options)) or open a device with ([`with_options`](crate::with_options)).

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, RwLock};

use liandan_tensor::settings::{env, Kind, Setting, SettingError, Vars};
use liandan_tensor::{Error, Result};

/// This crate's settings.
pub const SETTINGS: &[Setting] = &[AUTOTUNE, CACHE_DIR, CONV_TF32, COOP_MATRIX, MEMORY_BREAKDOWN, SHADER_CHECKS];

pub const AUTOTUNE: Setting = Setting {
    name: "LIANDAN_AUTOTUNE",
    kind: Kind::Switch,
    default: "0",
    doc: "`1` times the first product of each shape in every cut that fits it on this GPU and keeps the fastest, in a file per adapter \
          under the cache directory (as `torch.backends.cudnn.benchmark`; `liandan train --autotune` does the same).",
    owner: "liandan-backend-wgpu",
};

pub const CACHE_DIR: Setting = Setting {
    name: "LIANDAN_CACHE_DIR",
    kind: Kind::Dir,
    default: "the platform's cache directory, `liandan` under it",
    doc: "Where the autotune keeps its measured cuts (in `autotune/` under it).",
    owner: "liandan-backend-wgpu",
};

pub const CONV_TF32: Setting = Setting {
    name: "LIANDAN_CONV_TF32",
    kind: Kind::Switch,
    default: "0",
    doc: "`1` lets the larger f32 convolutions run on the f16 tensor cores with scaled operands, at TF32's precision \
          (`torch.backends.cudnn.allow_tf32`; `liandan train --conv-tf32` does the same). Off, f32 convolutions are exact f32.",
    owner: "liandan-backend-wgpu",
};

pub const COOP_MATRIX: Setting = Setting {
    name: "LIANDAN_COOP_MATRIX",
    kind: Kind::Switch,
    default: "1",
    doc: "`0` opens the GPU without cooperative matrices and keeps every f16 product on the ordinary kernels: to bisect a wrong result \
          to the tensor cores.",
    owner: "liandan-backend-wgpu",
};

pub const MEMORY_BREAKDOWN: Setting = Setting {
    name: "LIANDAN_MEMORY_BREAKDOWN",
    kind: Kind::Switch,
    default: "0",
    doc: "`1` records where each GPU buffer was made, so `liandan profile` can say what was live at the memory peak.",
    owner: "liandan-backend-wgpu",
};

pub const SHADER_CHECKS: Setting = Setting {
    name: "LIANDAN_SHADER_CHECKS",
    kind: Kind::Switch,
    default: "each kernel's own",
    doc: "`1` keeps naga's run-time checks (clamped indices, bounded loops) in every kernel, `0` drops them from every kernel; unset, \
          the products and convolutions go without them and the kernels that index by data keep them. To bisect a crash or a wrong result.",
    owner: "liandan-backend-wgpu",
};

/// How the wgpu backend runs on one device. The environment's settings ([`SETTINGS`]) give a
/// device its first options ([`WgpuOptions::from_env`]); a program may set others on a device
/// ([`WgpuBackend::set_options`](crate::WgpuBackend::set_options)) or open one with them ([`with_options`](crate::with_options)).
///
/// ```
/// use liandan_backend_wgpu::WgpuOptions;
/// let o = WgpuOptions { autotune: true, conv_tf32: true, ..WgpuOptions::default() };
/// assert!(o.coop_matrix, "tensor cores stay on where the GPU has them");
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WgpuOptions {
    /// Products are cut as measured on this adapter (`LIANDAN_AUTOTUNE`).
    pub autotune: bool,
    /// Where the autotune keeps its cuts, a file per adapter; `None` keeps them in memory.
    pub autotune_dir: Option<PathBuf>,
    /// Larger f32 convolutions may run on the f16 tensor cores (`LIANDAN_CONV_TF32`).
    pub conv_tf32: bool,
    /// f16 products use cooperative matrices where the adapter has them
    /// (`LIANDAN_COOP_MATRIX`). Applies when the device opens.
    pub coop_matrix: bool,
    /// Where each buffer was made is recorded (`LIANDAN_MEMORY_BREAKDOWN`). Applies when the
    /// device opens.
    pub memory_breakdown: bool,
    /// naga's run-time checks in every kernel (`Some(true)`), in none, or as each kernel
    /// family decides (`LIANDAN_SHADER_CHECKS`). Applies when the device opens.
    pub shader_checks: Option<bool>,
    /// Knobs for tests and benchmarks (`testing::Knobs`).
    #[doc(hidden)]
    pub testing: Knobs,
}

impl Default for WgpuOptions {
    /// Every setting at its default (the autotune's directory: the platform's cache directory).
    fn default() -> WgpuOptions {
        WgpuOptions {
            autotune: false,
            autotune_dir: platform_cache_dir().map(|d| d.join("autotune")),
            conv_tf32: false,
            coop_matrix: true,
            memory_breakdown: false,
            shader_checks: None,
            testing: Knobs::default(),
        }
    }
}

impl WgpuOptions {
    /// The options the environment sets; a bad value is an error naming the variable.
    pub fn from_env() -> std::result::Result<WgpuOptions, SettingError> {
        WgpuOptions::from_vars(&env)
    }

    /// The options `vars` sets.
    pub fn from_vars(vars: Vars) -> std::result::Result<WgpuOptions, SettingError> {
        let d = WgpuOptions::default();
        Ok(WgpuOptions {
            autotune: AUTOTUNE.switch_in(vars)?.unwrap_or(d.autotune),
            autotune_dir: CACHE_DIR.path_in(vars)?.map(|dir| dir.join("autotune")).or(d.autotune_dir),
            conv_tf32: CONV_TF32.switch_in(vars)?.unwrap_or(d.conv_tf32),
            coop_matrix: COOP_MATRIX.switch_in(vars)?.unwrap_or(d.coop_matrix),
            memory_breakdown: MEMORY_BREAKDOWN.switch_in(vars)?.unwrap_or(d.memory_breakdown),
            shader_checks: SHADER_CHECKS.switch_in(vars)?,
            testing: d.testing,
        })
    }

    /// What the routing reads of them (`plan::Options`).
    pub(crate) fn plan(&self) -> crate::plan::Options {
        let t = &self.testing;
        crate::plan::Options {
            conv_tf32: self.conv_tf32,
            tf32_any_size: t.tf32_any_size,
            coop_any_size: t.coop_any_size,
            coop_cut: t.coop_cut,
            conv_cut: t.conv_cut,
            conv_fold: t.conv_fold,
            conv_winograd: t.conv_winograd,
            winograd_chunk: t.winograd_chunk,
            tree_column_sums: t.tree_column_sums,
        }
    }

    /// Whether `self` and `other` differ in what applies when the device opens.
    pub(crate) fn differ_at_open(&self, other: &WgpuOptions) -> bool {
        (self.coop_matrix, self.memory_breakdown, self.shader_checks) != (other.coop_matrix, other.memory_breakdown, other.shader_checks)
            || self.testing.differ_at_open(&other.testing)
    }
}

/// The platform's cache directory with `liandan` under it (`$XDG_CACHE_HOME` or `~/.cache` on
/// Linux, `~/Library/Caches` on macOS, `%LOCALAPPDATA%` on Windows).
fn platform_cache_dir() -> Option<PathBuf> {
    let var = |name: &str| std::env::var_os(name).filter(|v| !v.is_empty()).map(PathBuf::from);
    let base = if cfg!(target_os = "macos") {
        var("HOME").map(|h| h.join("Library/Caches"))
    } else if cfg!(windows) {
        var("LOCALAPPDATA")
    } else {
        var("XDG_CACHE_HOME").or_else(|| var("HOME").map(|h| h.join(".cache")))
    };
    base.map(|b| b.join("liandan"))
}

/// Dispatches the ramp grows a batch to: larger batches let a host-bound step (the lstm's
/// some 330 dispatches) leave a whole batch's work to run after the host's last dispatch, as
/// the GPU waits for the batch to fill (on the H200 the lstm's pipelined step took 1.6-1.7 ms
/// with 64, 2.0-2.6 with 512).
pub(crate) const RAMP_TOP: usize = 64;
/// Dispatches in the first batch after a wait.
pub(crate) const FIRST_BATCH: usize = 16;

/// Knobs of [`crate::WgpuOptions`] for tests and benchmarks. The defaults are what programs run.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Knobs {
    /// Dispatches in the first batch submitted after a wait, 1 to 512 (see `gpu.rs`; 512
    /// submits in full batches only). Applies when the device opens.
    pub first_batch: usize,
    /// Dispatches the ramp grows a batch to, 1 to 512 (never below `first_batch`). Applies when
    /// the device opens.
    pub ramp_top: usize,
    /// The meta blocks travel as immediate data where the device has room for one (else in
    /// the arena buffer). Applies when the device opens.
    pub immediates: bool,
    /// A storage binding limit (bytes, at least 65,536) below the adapter's, so the paths for
    /// buffers past it can be tried on any GPU. Applies when the device opens.
    pub max_binding: Option<u64>,
    /// Submits and waits are timed into [`host_phases`](crate::testing::host_phases).
    pub host_phases: bool,
    /// Every convolution pass on the tiled kernels cut into `(tile, splits)`: tiles of 128
    /// (any other value means 64) and K in that many ranges (at least one, at most one per
    /// 16-deep slice; halved while the partial sums would not fit one binding). Winograd, the
    /// column buffer and the autotune then stay off, so what runs is the implicit GEMM so cut.
    pub conv_cut: Option<(usize, usize)>,
    /// f32 input gradients through the column buffer: every one it takes (`Some(true)`), none
    /// (`Some(false)`), or as its rule says.
    pub conv_fold: Option<bool>,
    /// Every f32 convolution Winograd takes on tiles of 2 x 2 or 4 x 4 outputs (`Some(2)`,
    /// `Some(4)`), none (`Some(0)`), or as its rule says.
    pub conv_winograd: Option<usize>,
    /// Bytes of the images a Winograd weight gradient takes at once (at least one image).
    pub winograd_chunk: Option<usize>,
    /// f32 passes of every size go on the tensor cores under `conv_tf32`, the small ones too.
    pub tf32_any_size: bool,
    /// f16 products of every size go on the tensor cores where the adapter has them, the
    /// small ones too (which the routing otherwise leaves to the ordinary kernels).
    pub coop_any_size: bool,
    /// Every product and convolution pass on the tensor cores on tiles of `(rows, columns)`
    /// (64 x 128, 128 x 128, 128 x 256 or 256 x 128; other tiles leave the rule's) with K in
    /// that many ranges (at least one; a convolution's at most one a 32-deep slice), so that
    /// each layout can be timed on any product. A convolution so cut skips Winograd, and its
    /// weight gradient goes there from 64 output channels (the rule's from 128).
    pub coop_cut: Option<((usize, usize), usize)>,
    /// Sums down few columns stay on the tree reduction rather than the column kernel, so
    /// that the two can be timed against each other.
    pub tree_column_sums: bool,
    /// How layer norm's row kernels sum a row, so that each way runs on any device that can.
    pub row_sums: RowSums,
    /// Workgroups a head in the fused attention's backward on the ordinary units (1, 2 or 3;
    /// `None`: the rule's), so that each spread can be timed.
    pub attention_sides: Option<u32>,
    /// The f32 products of a feed-forward block on GELU write GELU with the first layer's
    /// sums and take GELU's gradient with the second layer's input gradient
    /// (`ops::LinearGelu`, `ops::MatmulGeluBackward`); off, their composites run (the products,
    /// then GELU's kernels), so that the two can be timed against each other.
    pub gelu_epilogues: bool,
}

/// How layer norm's row kernels sum a row ([`Knobs::row_sums`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum RowSums {
    /// As the device allows: a row to a subgroup where its subgroups have one size, else a
    /// row to a workgroup summed by subgroups where it has them, else by a tree.
    #[default]
    Auto,
    /// A row to a workgroup, summed by subgroups (by a tree where the device has none).
    Subgroups,
    /// A row to a workgroup, summed by a tree in workgroup memory.
    Tree,
}

impl Default for Knobs {
    fn default() -> Knobs {
        Knobs {
            first_batch: FIRST_BATCH,
            ramp_top: RAMP_TOP,
            immediates: true,
            max_binding: None,
            host_phases: false,
            conv_cut: None,
            conv_fold: None,
            conv_winograd: None,
            winograd_chunk: None,
            tf32_any_size: false,
            coop_any_size: false,
            coop_cut: None,
            tree_column_sums: false,
            row_sums: RowSums::Auto,
            attention_sides: None,
            gelu_epilogues: false,
        }
    }
}

impl Knobs {
    /// Whether `self` and `other` differ in what applies when the device opens.
    pub(crate) fn differ_at_open(&self, other: &Knobs) -> bool {
        (self.first_batch, self.ramp_top, self.immediates, self.max_binding) != (other.first_batch, other.ramp_top, other.immediates, other.max_binding)
    }
}

/// A device's options, shared by its backend and its opened device (`Gpu`), read once per call
/// that needs them.
#[derive(Debug)]
pub(crate) struct Shared {
    options: RwLock<Arc<WgpuOptions>>,
    /// A bad setting in the environment, reported by every call until options are set.
    bad: RwLock<Option<SettingError>>,
    /// Whether `bad` holds one (read by every call, so without a lock).
    any_bad: AtomicBool,
}

impl Shared {
    /// The environment's options, or the defaults and the error where a setting is bad.
    pub(crate) fn from_env() -> Shared {
        let (options, bad) = match WgpuOptions::from_env() {
            Ok(o) => (o, None),
            Err(e) => (WgpuOptions::default(), Some(e)),
        };
        Shared::new(options, bad)
    }

    pub(crate) fn new(options: WgpuOptions, bad: Option<SettingError>) -> Shared {
        Shared { any_bad: AtomicBool::new(bad.is_some()), options: RwLock::new(Arc::new(options)), bad: RwLock::new(bad) }
    }

    pub(crate) fn get(&self) -> Arc<WgpuOptions> {
        self.options.read().unwrap_or_else(|p| p.into_inner()).clone()
    }

    /// The environment's error, if a setting was bad and no options were set since.
    pub(crate) fn check(&self) -> Result<()> {
        if !self.any_bad.load(Ordering::Relaxed) {
            return Ok(());
        }
        match &*self.bad.read().unwrap_or_else(|p| p.into_inner()) {
            Some(e) => Err(Error::Setting(e.clone())),
            None => Ok(()),
        }
    }

    pub(crate) fn set(&self, options: WgpuOptions) {
        *self.options.write().unwrap_or_else(|p| p.into_inner()) = Arc::new(options);
        *self.bad.write().unwrap_or_else(|p| p.into_inner()) = None;
        self.any_bad.store(false, Ordering::Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_setting_rejects_a_bad_value_naming_itself() {
        liandan_tensor::settings::assert_bad_values_named(SETTINGS, WgpuOptions::from_vars);
    }

    #[test]
    fn the_environment_sets_what_it_names() {
        let vars = |n: &str| -> Option<std::ffi::OsString> {
            let v = match n {
                "LIANDAN_AUTOTUNE" => "on",
                "LIANDAN_CACHE_DIR" => "/tmp/liandan-cache",
                "LIANDAN_COOP_MATRIX" => "0",
                "LIANDAN_SHADER_CHECKS" => "1",
                _ => return None,
            };
            Some(v.into())
        };
        let o = WgpuOptions::from_vars(&vars).unwrap();
        assert!(o.autotune && !o.coop_matrix && !o.conv_tf32 && o.shader_checks == Some(true));
        assert_eq!(o.autotune_dir, Some(PathBuf::from("/tmp/liandan-cache/autotune")));
        assert_eq!(WgpuOptions::from_vars(&liandan_tensor::settings::no_vars).unwrap(), WgpuOptions::default());
    }
}

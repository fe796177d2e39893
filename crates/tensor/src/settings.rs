//! Settings read from the environment. Each crate that reads one declares it once, in a table
//! of [`Setting`]s (its name, kind, default, meaning and owner), and parses it once, through
//! the methods here, into options it owns; so every setting is validated the same way, and a
//! bad value is an error that names the variable and what it accepts:
//! `LIANDAN_FUSION="maybe": expected 0 or 1 (or off/on, false/true)`.
//! `docs/SETTINGS.md` is generated from the tables (`cargo xtask docs`).
//!
//! ```
//! use liandan_tensor::settings::{self, Kind, Setting};
//! const LEVEL: Setting = Setting { name: "MY_LEVEL", kind: Kind::Count { min: 1, max: 9 }, default: "3", doc: "How hard to try.", owner: "my-crate" };
//! let vars = |name: &str| (name == "MY_LEVEL").then(|| std::ffi::OsString::from("12"));
//! let err = LEVEL.count_in(&vars).unwrap_err().to_string();
//! assert_eq!(err, "MY_LEVEL=\"12\": expected a whole number from 1 to 9");
//! assert_eq!(LEVEL.count_in(&settings::no_vars).unwrap(), None);
//! ```

use std::ffi::OsString;
use std::path::PathBuf;
use std::sync::OnceLock;

/// A value a setting does not accept: `{name}={value}: expected {expected}`.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{name}={value}: expected {expected}")]
pub struct SettingError {
    /// The variable.
    pub name: &'static str,
    /// Its value as written, quoted.
    pub value: String,
    /// What it accepts ([`Kind::expected`]).
    pub expected: String,
}

/// `Result` with a [`SettingError`].
pub type Result<T> = std::result::Result<T, SettingError>;

/// Where settings are read from: a variable's value, or `None` where it is unset. The process
/// environment is [`env()`]; tests pass their own.
pub type Vars<'a> = &'a dyn Fn(&str) -> Option<OsString>;

/// The process environment.
pub fn env(name: &str) -> Option<OsString> {
    std::env::var_os(name)
}

/// An environment with nothing set.
pub fn no_vars(_: &str) -> Option<OsString> {
    None
}

/// Panics unless `read`, given each of `settings` alone set to a bad value, fails with an error
/// that names the setting and what it accepts: each crate's test of its own table.
#[doc(hidden)]
pub fn assert_bad_values_named<T, E: std::fmt::Display>(settings: &[Setting], read: impl Fn(Vars) -> std::result::Result<T, E>) {
    for s in settings {
        let bad = s.kind.bad_value();
        let vars = |n: &str| (n == s.name).then(|| bad.clone());
        let Err(err) = read(&vars) else { panic!("{}={bad:?} was accepted", s.name) };
        let err = err.to_string();
        assert!(err.starts_with(&format!("{}=", s.name)) && err.contains(&s.kind.expected()), "{err}");
    }
}

/// What a setting's value may be.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// `0` or `1` (also `off`/`on`, `false`/`true`, in any case).
    Switch,
    /// One of these names, in any case.
    Choice(&'static [&'static str]),
    /// A whole number from `min` to `max`.
    Count { min: u64, max: u64 },
    /// A directory: any path but that of an existing file.
    Dir,
    /// An `http://` or `https://` URL.
    Url,
    /// A device: `cpu`, `gpu` or `gpu:N`.
    Device,
}

impl Kind {
    /// What a value of this kind may be, as an error message and the docs say it.
    pub fn expected(&self) -> String {
        match self {
            Kind::Switch => "0 or 1 (or off/on, false/true)".into(),
            Kind::Choice(names) => format!("one of {}", names.join(", ")),
            Kind::Count { min, max } => format!("a whole number from {min} to {max}"),
            Kind::Dir => "a directory (not a file)".into(),
            Kind::Url => "an http:// or https:// URL".into(),
            Kind::Device => "cpu, gpu or gpu:N".into(),
        }
    }

    /// A value of this kind that is wrong: for tests that every setting rejects one.
    pub fn bad_value(&self) -> OsString {
        match self {
            Kind::Switch | Kind::Choice(_) => "maybe".into(),
            Kind::Count { max, .. } => max.saturating_add(1).to_string().into(),
            // This crate's own manifest: a file, where a directory is wanted.
            Kind::Dir => concat!(env!("CARGO_MANIFEST_DIR"), "/Cargo.toml").into(),
            Kind::Url => "ftp://example.com/".into(),
            Kind::Device => "tpu".into(),
        }
    }
}

/// A parsed value.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Value {
    Switch(bool),
    Choice(&'static str),
    Count(u64),
    Path(PathBuf),
    /// A URL or a device, trimmed.
    Text(String),
}

impl std::fmt::Display for Value {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Value::Switch(on) => write!(f, "{}", u8::from(*on)),
            Value::Choice(name) => write!(f, "{name}"),
            Value::Count(n) => write!(f, "{n}"),
            Value::Path(p) => write!(f, "{}", p.display()),
            Value::Text(t) => write!(f, "{t}"),
        }
    }
}

/// One setting of one crate's table.
#[derive(Clone, Copy, Debug)]
pub struct Setting {
    /// The environment variable.
    pub name: &'static str,
    pub kind: Kind,
    /// Its value when unset: a value of its kind, or words where the default is not one
    /// (`the platform's cache directory`).
    pub default: &'static str,
    /// What it does, in a sentence or two.
    pub doc: &'static str,
    /// The crate that reads it.
    pub owner: &'static str,
}

impl Setting {
    /// The error for `value`, which this setting does not accept.
    fn bad(&self, value: impl std::fmt::Debug) -> SettingError {
        SettingError { name: self.name, value: format!("{value:?}"), expected: self.kind.expected() }
    }

    /// Parses `value` as this setting's kind; a value of only spaces is unset (`None`).
    pub fn parse(&self, value: &std::ffi::OsStr) -> Result<Option<Value>> {
        if self.kind == Kind::Dir {
            // A path need not be text.
            if value.to_string_lossy().trim().is_empty() {
                return Ok(None);
            }
            let path = PathBuf::from(value);
            return if path.is_file() { Err(self.bad(value)) } else { Ok(Some(Value::Path(path))) };
        }
        let Some(text) = value.to_str() else { return Err(self.bad(value)) };
        let v = text.trim().to_ascii_lowercase();
        if v.is_empty() {
            return Ok(None);
        }
        let parsed = match self.kind {
            Kind::Switch => match v.as_str() {
                "0" | "off" | "false" => Some(Value::Switch(false)),
                "1" | "on" | "true" => Some(Value::Switch(true)),
                _ => None,
            },
            Kind::Choice(names) => names.iter().copied().find(|n| *n == v).map(Value::Choice),
            Kind::Count { min, max } => v.parse::<u64>().ok().filter(|n| (min..=max).contains(n)).map(Value::Count),
            Kind::Url => (v.starts_with("http://") || v.starts_with("https://")).then(|| Value::Text(text.trim().to_string())),
            Kind::Device => {
                let gpu_n = v.strip_prefix("gpu:").is_some_and(|n| n.parse::<usize>().is_ok());
                (v == "cpu" || v == "gpu" || gpu_n).then_some(Value::Text(v))
            }
            Kind::Dir => unreachable!("paths are parsed above"),
        };
        parsed.map(Some).ok_or_else(|| self.bad(text))
    }

    /// Its value in `vars`: `None` where unset or blank, an error where it is not of its kind.
    pub fn value_in(&self, vars: Vars) -> Result<Option<Value>> {
        match vars(self.name) {
            Some(v) => self.parse(&v),
            None => Ok(None),
        }
    }

    /// A [`Kind::Switch`]'s value in `vars`.
    pub fn switch_in(&self, vars: Vars) -> Result<Option<bool>> {
        Ok(self.value_in(vars)?.map(|v| matches!(v, Value::Switch(true))))
    }

    /// A [`Kind::Choice`]'s value in `vars`.
    pub fn choice_in(&self, vars: Vars) -> Result<Option<&'static str>> {
        Ok(self.value_in(vars)?.and_then(|v| if let Value::Choice(c) = v { Some(c) } else { None }))
    }

    /// A [`Kind::Count`]'s value in `vars`.
    pub fn count_in(&self, vars: Vars) -> Result<Option<u64>> {
        Ok(self.value_in(vars)?.and_then(|v| if let Value::Count(n) = v { Some(n) } else { None }))
    }

    /// A [`Kind::Dir`]'s value in `vars`.
    pub fn path_in(&self, vars: Vars) -> Result<Option<PathBuf>> {
        Ok(self.value_in(vars)?.and_then(|v| if let Value::Path(p) = v { Some(p) } else { None }))
    }

    /// A [`Kind::Url`]'s or [`Kind::Device`]'s value in `vars`.
    pub fn text_in(&self, vars: Vars) -> Result<Option<String>> {
        Ok(self.value_in(vars)?.map(|v| v.to_string()))
    }

    /// Its value in `vars` where that differs from its default (`liandan info` lists these).
    pub fn changed_in(&self, vars: Vars) -> Result<Option<Value>> {
        let default = self.parse(std::ffi::OsStr::new(self.default)).ok().flatten();
        Ok(self.value_in(vars)?.filter(|v| Some(v) != default.as_ref()))
    }
}

/// This crate's settings.
pub const SETTINGS: &[Setting] = &[DEVICE, FUSION];

/// The settings the workspace's tests read (through the constants here, so that they are
/// checked as every other setting is).
pub const TEST_SETTINGS: &[Setting] = &[REQUIRE_GPU, PARITY_OUT, ONNX_DIR, SPIRV_DUMP];

/// The device [`crate::Device::best`] picks.
pub const DEVICE: Setting = Setting {
    name: "LIANDAN_DEVICE",
    kind: Kind::Device,
    default: "the best device",
    doc: "The device to run on: `cpu`, `gpu` (the first GPU) or `gpu:N`. Unset, a discrete GPU, then an integrated one, then the CPU; \
          a software GPU (lavapipe) only when named.",
    owner: "liandan-tensor",
};

pub const FUSION: Setting = Setting {
    name: "LIANDAN_FUSION",
    kind: Kind::Switch,
    default: "1",
    doc: "`0` turns every fused kernel off, so each composite runs its primitives: to bisect a wrong result to a fusion.",
    owner: "liandan-tensor",
};

pub const REQUIRE_GPU: Setting = Setting {
    name: "LIANDAN_REQUIRE_GPU",
    kind: Kind::Switch,
    default: "0",
    doc: "`1` makes a missing GPU adapter a failure of the GPU tests rather than a skip (`.ci/run` sets it).",
    owner: "the tests of every crate",
};

pub const PARITY_OUT: Setting = Setting {
    name: "LIANDAN_PARITY_OUT",
    kind: Kind::Dir,
    default: "a temporary directory",
    doc: "Where the model-parity test writes every zoo model with its parity weights as safetensors, for the PyTorch script \
          that checks them.",
    owner: "the tests of liandan-nn",
};

pub const ONNX_DIR: Setting = Setting {
    name: "LIANDAN_ONNX_DIR",
    kind: Kind::Dir,
    default: "not written",
    doc: "Where the ONNX export test (run by `tests/data/onnx/check_onnx.py`) writes each exported model, its inputs and \
          liandan's outputs, for ONNX Runtime to check.",
    owner: "the tests of liandan-nn",
};

pub const SPIRV_DUMP: Setting = Setting {
    name: "LIANDAN_SPIRV_DUMP",
    kind: Kind::Dir,
    default: "not written",
    doc: "Where the shader test writes each cooperative-matrix kernel as SPIR-V (`<n>.spv`, its key in `<n>.txt`), for `spirv-val`.",
    owner: "the tests of liandan-backend-wgpu",
};

/// The options of this crate, as the environment sets them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TensorOptions {
    /// Fused kernels may run (`LIANDAN_FUSION`).
    pub fusion: bool,
}

impl Default for TensorOptions {
    fn default() -> Self {
        TensorOptions { fusion: true }
    }
}

impl TensorOptions {
    /// The options `vars` set. (`LIANDAN_DEVICE` is read where a device is picked:
    /// [`crate::Device::from_env`].)
    pub fn from_vars(vars: Vars) -> Result<TensorOptions> {
        Ok(TensorOptions { fusion: FUSION.switch_in(vars)?.unwrap_or(true) })
    }
}

/// This process's [`TensorOptions`], read from the environment once.
pub fn options() -> Result<TensorOptions> {
    static OPTIONS: OnceLock<Result<TensorOptions>> = OnceLock::new();
    OPTIONS.get_or_init(|| TensorOptions::from_vars(&env)).clone()
}

/// Whether tests must fail rather than skip without a GPU (`LIANDAN_REQUIRE_GPU`).
pub fn require_gpu() -> Result<bool> {
    Ok(REQUIRE_GPU.switch_in(&env)?.unwrap_or(false))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn with<'a>(name: &'a str, value: &'a str) -> impl Fn(&str) -> Option<OsString> + 'a {
        move |n: &str| (n == name).then(|| value.into())
    }

    #[test]
    fn kinds_take_their_values_and_name_the_rest() {
        let switch = Setting { name: "S", kind: Kind::Switch, default: "0", doc: "", owner: "" };
        for (v, want) in [("1", true), ("On", true), (" true ", true), ("0", false), ("OFF", false), ("false", false)] {
            assert_eq!(switch.switch_in(&with("S", v)).unwrap(), Some(want), "{v}");
        }
        assert_eq!(switch.switch_in(&with("S", "  ")).unwrap(), None, "blank is unset");
        assert_eq!(switch.switch_in(&with("S", "yes")).unwrap_err().to_string(), "S=\"yes\": expected 0 or 1 (or off/on, false/true)");
        let choice = Setting { name: "C", kind: Kind::Choice(&["gemm", "tuned"]), default: "gemm", doc: "", owner: "" };
        assert_eq!(choice.choice_in(&with("C", "Tuned")).unwrap(), Some("tuned"));
        assert_eq!(choice.changed_in(&with("C", "gemm")).unwrap(), None, "the default is no change");
        assert_eq!(choice.changed_in(&with("C", "tuned")).unwrap(), Some(Value::Choice("tuned")));
        assert!(choice.choice_in(&with("C", "blas")).unwrap_err().to_string().contains("one of gemm, tuned"));
        let device = Setting { name: "D", kind: Kind::Device, default: "", doc: "", owner: "" };
        assert_eq!(device.text_in(&with("D", "GPU:1")).unwrap().as_deref(), Some("gpu:1"));
        assert!(device.text_in(&with("D", "gpu:x")).is_err());
        let dir = Setting { name: "P", kind: Kind::Dir, default: "", doc: "", owner: "" };
        assert_eq!(dir.path_in(&with("P", "/no/such/dir")).unwrap(), Some(PathBuf::from("/no/such/dir")));
    }

    #[test]
    fn every_setting_rejects_a_bad_value_naming_itself() {
        let named = |s: &Setting, err: SettingError| {
            let err = err.to_string();
            assert!(err.starts_with(&format!("{}=", s.name)) && err.contains(&s.kind.expected()), "{err}");
        };
        let bad = FUSION.kind.bad_value();
        named(&FUSION, TensorOptions::from_vars(&|n: &str| (n == FUSION.name).then(|| bad.clone())).expect_err("fusion"));
        for s in SETTINGS.iter().chain(TEST_SETTINGS) {
            let bad = s.kind.bad_value();
            named(s, s.value_in(&|n: &str| (n == s.name).then(|| bad.clone())).expect_err(s.name));
        }
    }
}

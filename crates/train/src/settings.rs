//! This crate's settings: where datasets are downloaded to and from (see
//! `liandan_tensor::settings`).

use liandan_tensor::settings::{Kind, Setting};

/// This crate's settings.
pub const SETTINGS: &[Setting] = &[DATA, DATA_URL];

pub const DATA: Setting = Setting {
    name: "LIANDAN_DATA",
    kind: Kind::Dir,
    default: "the platform's cache directory, `liandan` under it",
    doc: "Where downloaded datasets (MNIST, Fashion-MNIST, CIFAR-10) are kept.",
    owner: "liandan-train",
};

pub const DATA_URL: Setting = Setting {
    name: "LIANDAN_DATA_URL",
    kind: Kind::Url,
    default: "each dataset's own server",
    doc: "The base URL datasets are downloaded from instead: a mirror holding the same file names.",
    owner: "liandan-train",
};

#[cfg(test)]
mod tests {
    use super::SETTINGS;

    /// The settings are read where they are used (`data::download`); each rejects a bad value
    /// there with an error naming it.
    #[test]
    fn every_setting_rejects_a_bad_value_naming_itself() {
        liandan_tensor::settings::assert_bad_values_named(SETTINGS, crate::data::download::read_settings);
    }
}

//! The zoo's models for the data at hand: `build_for` sizes `mlp`'s first layer from a
//! sample's shape, checks every other model's, and the vae's encoder and decoder work alone.

use liandan_nn::zoo::{self, Vae};
use liandan_nn::{DType, Device, Forward, ModuleExt, Tensor};

#[test]
fn mlp_takes_the_inputs_of_the_data_it_is_built_for() {
    let dev = Device::cpu();
    for (sample, inputs) in [(&[1, 28, 28][..], 784), (&[3, 32, 32][..], 3072), (&[1024][..], 1024)] {
        let model = zoo::build_for("mlp", sample, &dev).unwrap();
        assert_eq!(model.sample_shape(), [inputs]);
        assert_eq!(model.num_parameters(), inputs * 512 + 512 + 512 * 256 + 256 + 256 * 10 + 10);
        let mut batch = vec![2];
        batch.extend_from_slice(sample);
        let out = model.forward(&Tensor::rand(&batch, 0.0, 1.0, 3, DType::F32, &dev).unwrap()).unwrap();
        assert_eq!(out.shape(), [2, 10]);
    }
    // The reference network is unchanged.
    let reference = zoo::build("mlp", &dev).unwrap();
    assert_eq!((reference.num_parameters(), reference.sample_shape()), (658_698, vec![1024]));
}

#[test]
fn the_other_models_take_their_own_samples_or_say_which() {
    let dev = Device::cpu();
    // The lstm reads a [1, 28, 28] image as 28 rows of 28: the same values.
    assert_eq!(zoo::build_for("lstm", &[1, 28, 28], &dev).unwrap().sample_shape(), [28, 28]);
    assert_eq!(zoo::build_for("vae", &[1, 28, 28], &dev).unwrap().sample_shape(), [784]);
    let e = zoo::build_for("vit", &[1, 28, 28], &dev).err().expect("vit takes 3x32x32").to_string();
    assert_eq!(e, "`vit` takes samples of shape [3, 32, 32], not [1, 28, 28]");
    assert!(zoo::build_for("alexnet", &[1, 28, 28], &dev).is_err());
}

#[test]
fn the_vae_decodes_draws_of_the_prior_into_images() {
    let dev = Device::cpu();
    let vae = Vae::new(&dev).unwrap();
    let z = Tensor::randn(&[3, Vae::LATENT], 7, DType::F32, &dev).unwrap();
    let images = vae.decode(&z).unwrap();
    assert_eq!(images.shape(), [3, 784]);
    assert!(images.to_vec_f64().unwrap().iter().all(|p| (0.0..=1.0).contains(p)));
    let (mu, logvar) = vae.encode(&images).unwrap();
    assert_eq!((mu.shape(), logvar.shape()), (&[3, Vae::LATENT][..], &[3, Vae::LATENT][..]));
}

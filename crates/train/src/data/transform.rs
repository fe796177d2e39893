//! Per-sample transforms (`torchvision.transforms`): scaling to float, normalization, random
//! crops and flips, seeded per sample so that augmentations are reproducible.

use std::sync::Arc;

use super::{rng, Dataset, Sample};
use crate::error::{Error, Result};

/// One step of a sample's preprocessing. Images are `[C, H, W]`; the crop and flip act on the
/// last two dimensions.
#[derive(Clone, Debug, PartialEq)]
pub enum Transform {
    /// Multiplies every value by `scale`: `1.0 / 255.0` turns u8 pixels into `[0, 1]`, as
    /// torchvision's `ToTensor` does.
    ToFloat { scale: f32 },
    /// `(x - mean[c]) / std[c]` per channel `c` (one value of each applies to every channel).
    Normalize { mean: Vec<f32>, std: Vec<f32> },
    /// Pads `padding` zeros on every side, then cuts a random `height` x `width` window
    /// (`RandomCrop(size, padding)`).
    RandomCrop { height: usize, width: usize, padding: usize },
    /// Mirrors the image left to right with probability `p`.
    RandomHorizontalFlip { p: f32 },
}

impl Transform {
    /// Checks the parameters that do not depend on a sample.
    fn validate(&self) -> Result<()> {
        let bad = |what: String| Err(Error::InvalidArgument { op: "Transform", what });
        match self {
            Transform::ToFloat { scale } if !scale.is_finite() => bad(format!("ToFloat scale {scale} is not finite")),
            Transform::Normalize { mean, std } if mean.is_empty() || mean.len() != std.len() => {
                bad(format!("Normalize needs as many means as stds, at least one: got {} and {}", mean.len(), std.len()))
            }
            Transform::Normalize { std, .. } if std.iter().any(|&s| !(s > 0.0 && s.is_finite())) => {
                bad(format!("Normalize stds must be positive and finite: {std:?}"))
            }
            Transform::RandomCrop { height, width, .. } if *height == 0 || *width == 0 => bad("RandomCrop size must be positive".into()),
            Transform::RandomHorizontalFlip { p } if !(0.0..=1.0).contains(p) => bad(format!("RandomHorizontalFlip p = {p} is not in [0, 1]")),
            _ => Ok(()),
        }
    }

    /// Applies this step to `sample`, drawing from stream `seed`.
    pub fn apply(&self, mut sample: Sample, seed: u64) -> Result<Sample> {
        match self {
            Transform::ToFloat { scale } => sample.input.iter_mut().for_each(|v| *v *= scale),
            Transform::Normalize { mean, std } => {
                let channels = sample.shape.first().copied().unwrap_or(1);
                if mean.len() != 1 && mean.len() != channels {
                    return Err(shape_error("Normalize", format!("{} means for a sample of shape {:?} with {channels} channels", mean.len(), sample.shape)));
                }
                let per = sample.input.len() / channels.max(1);
                for (c, plane) in sample.input.chunks_mut(per.max(1)).enumerate() {
                    let k = if mean.len() == 1 { 0 } else { c };
                    let (m, inv) = (mean[k], 1.0 / std[k]);
                    plane.iter_mut().for_each(|v| *v = (*v - m) * inv);
                }
            }
            Transform::RandomCrop { height, width, padding } => {
                let (planes, h, w) = image_dims("RandomCrop", &sample.shape)?;
                let (ph, pw) = (h + 2 * padding, w + 2 * padding);
                if *height > ph || *width > pw {
                    return Err(shape_error("RandomCrop", format!("a {height}x{width} crop does not fit a {h}x{w} image padded by {padding}")));
                }
                let top = rng::below(seed, 0, (ph - height + 1) as u64) as usize;
                let left = rng::below(seed, 1, (pw - width + 1) as u64) as usize;
                let mut out = vec![0.0f32; planes * height * width];
                for (p, dst) in out.chunks_mut(height * width).enumerate() {
                    let src = &sample.input[p * h * w..(p + 1) * h * w];
                    for y in 0..*height {
                        // Source row in unpadded coordinates; rows in the padding stay zero.
                        let Some(sy) = (y + top).checked_sub(*padding).filter(|&sy| sy < h) else { continue };
                        for x in 0..*width {
                            if let Some(sx) = (x + left).checked_sub(*padding).filter(|&sx| sx < w) {
                                dst[y * width + x] = src[sy * w + sx];
                            }
                        }
                    }
                }
                let rank = sample.shape.len();
                sample.shape[rank - 2] = *height;
                sample.shape[rank - 1] = *width;
                sample.input = out;
            }
            Transform::RandomHorizontalFlip { p } => {
                let (_, _, w) = image_dims("RandomHorizontalFlip", &sample.shape)?;
                if rng::unit(seed, 0) < *p {
                    sample.input.chunks_mut(w).for_each(<[f32]>::reverse);
                }
            }
        }
        Ok(sample)
    }
}

/// `(planes, H, W)` of an image shape `[..., H, W]`.
fn image_dims(op: &'static str, shape: &[usize]) -> Result<(usize, usize, usize)> {
    match shape {
        [lead @ .., h, w] if *h > 0 && *w > 0 => Ok((lead.iter().product(), *h, *w)),
        _ => Err(shape_error(op, format!("needs an image of shape [..., H, W], got {shape:?}"))),
    }
}

fn shape_error(op: &'static str, what: String) -> Error {
    Error::InvalidArgument { op, what }
}

/// A dataset whose samples pass through a list of transforms, in order (`transforms.Compose`).
#[derive(Clone)]
pub struct Transformed {
    dataset: Arc<dyn Dataset>,
    transforms: Arc<[Transform]>,
}

impl Transformed {
    /// Errors when a transform's parameters are out of their domain.
    pub fn new(dataset: Arc<dyn Dataset>, transforms: Vec<Transform>) -> Result<Transformed> {
        transforms.iter().try_for_each(Transform::validate)?;
        Ok(Transformed { dataset, transforms: transforms.into() })
    }

    /// The transforms, in the order they apply.
    pub fn transforms(&self) -> &[Transform] {
        &self.transforms
    }
}

impl Dataset for Transformed {
    fn len(&self) -> usize {
        self.dataset.len()
    }

    /// Without a loader's seed, the draws depend on the index alone (as in epoch 0 of seed 0).
    fn get(&self, index: usize) -> Result<Sample> {
        self.get_seeded(index, rng::derive(0, index as u64))
    }

    fn get_seeded(&self, index: usize, seed: u64) -> Result<Sample> {
        let mut sample = self.dataset.get_seeded(index, rng::derive(seed, 0))?;
        for (k, t) in self.transforms.iter().enumerate() {
            sample = t.apply(sample, rng::derive(seed, k as u64 + 1))?;
        }
        Ok(sample)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A `[2, 3, 4]` image whose values are their own indices.
    fn image() -> Sample {
        Sample { input: (0..24).map(|v| v as f32).collect(), shape: vec![2, 3, 4], target: 1 }
    }

    #[test]
    fn scale_and_per_channel_normalize() {
        let s = Transform::ToFloat { scale: 0.5 }.apply(image(), 0).unwrap();
        assert_eq!(s.input[23], 11.5);
        let n = Transform::Normalize { mean: vec![1.0, 2.0], std: vec![2.0, 4.0] }.apply(image(), 0).unwrap();
        assert_eq!((n.input[0], n.input[11], n.input[12], n.input[23]), (-0.5, 5.0, 2.5, 5.25));
        assert!(Transform::Normalize { mean: vec![0.0; 3], std: vec![1.0; 3] }.apply(image(), 0).is_err());
    }

    #[test]
    fn crop_without_padding_at_full_size_is_the_identity_and_padding_shows_zeros() {
        let same = Transform::RandomCrop { height: 3, width: 4, padding: 0 }.apply(image(), 9).unwrap();
        assert_eq!(same, image());
        let mut zeros_seen = false;
        for seed in 0..50 {
            let c = Transform::RandomCrop { height: 3, width: 4, padding: 2 }.apply(image(), seed).unwrap();
            assert_eq!(c.shape, [2, 3, 4]);
            // Every value is zero padding or a source value from the same plane.
            for (i, &v) in c.input.iter().enumerate() {
                let plane = (i / 12) as f32;
                assert!(v == 0.0 || (v >= plane * 12.0 && v < plane * 12.0 + 12.0), "{v} in plane {plane}");
            }
            zeros_seen |= c.input.iter().filter(|&&v| v == 0.0).count() > 1;
            assert_eq!(c, Transform::RandomCrop { height: 3, width: 4, padding: 2 }.apply(image(), seed).unwrap());
        }
        assert!(zeros_seen);
        assert!(Transform::RandomCrop { height: 9, width: 4, padding: 2 }.apply(image(), 0).is_err());
    }

    #[test]
    fn flip_mirrors_rows_with_probability_p() {
        let f = Transform::RandomHorizontalFlip { p: 1.0 }.apply(image(), 3).unwrap();
        assert_eq!(&f.input[..4], &[3.0, 2.0, 1.0, 0.0]);
        assert_eq!(Transform::RandomHorizontalFlip { p: 0.0 }.apply(image(), 3).unwrap(), image());
        let flipped = (0..1000).filter(|&s| Transform::RandomHorizontalFlip { p: 0.5 }.apply(image(), s).unwrap() != image()).count();
        assert!((400..600).contains(&flipped), "{flipped}");
    }

    #[test]
    fn bad_parameters_are_refused() {
        let ds: Arc<dyn Dataset> = Arc::new(super::super::Synthetic::new(2, &[1, 2, 2], 2, 0).unwrap());
        for t in [
            Transform::Normalize { mean: vec![0.0], std: vec![0.0] },
            Transform::RandomHorizontalFlip { p: 2.0 },
            Transform::RandomCrop { height: 0, width: 1, padding: 0 },
        ] {
            assert!(Transformed::new(ds.clone(), vec![t]).is_err());
        }
    }
}

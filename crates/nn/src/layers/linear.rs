//! `Linear`: `y = x W^T + b` (`torch.nn.Linear`).

use liandan_tensor::{Device, Tensor};

use super::{default_bound, uniform_param, with_fields};
use crate::error::Result;
use crate::impl_module;
use crate::module::Forward;

/// Configuration of a [`Linear`] layer (`torch.nn.Linear(in_features, out_features, bias=True)`).
#[derive(Clone, Debug)]
pub struct LinearConfig {
    pub in_features: usize,
    pub out_features: usize,
    /// Whether the layer has a bias (default true).
    pub bias: bool,
}

with_fields!(LinearConfig { with_bias: bias: bool });

impl LinearConfig {
    /// A layer from `in_features` to `out_features`, with bias.
    pub fn new(in_features: usize, out_features: usize) -> Self {
        LinearConfig { in_features, out_features, bias: true }
    }

    /// A layer on `device`, F32, weight and bias uniform(±1/√in_features) as PyTorch.
    pub fn init(&self, device: &Device) -> Result<Linear> {
        let bound = default_bound(self.in_features);
        let weight = uniform_param(&[self.out_features, self.in_features], bound, device)?;
        let bias = if self.bias { Some(uniform_param(&[self.out_features], bound, device)?) } else { None };
        Ok(Linear { weight, bias })
    }
}

/// A fully connected layer, `y = x W^T + b`.
///
/// State-dict keys: `weight`, `bias`.
///
/// # Shapes
/// - input: `[*, in_features]` (any leading dims)
/// - `weight`: `[out_features, in_features]`, `bias`: `[out_features]`
/// - output: `[*, out_features]`
#[derive(Clone, Debug)]
pub struct Linear {
    pub weight: Tensor,
    pub bias: Option<Tensor>,
}

impl_module!(Linear { params: [weight, bias] });

impl Forward for Linear {
    fn forward_impl(&self, x: &Tensor) -> Result<Tensor> {
        Ok(x.linear(&self.weight, self.bias.as_ref())?)
    }
}

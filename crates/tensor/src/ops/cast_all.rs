//! Many tensors cast at once ([`CastAll`]): a custom op of its own file, since autocast, which
//! the elementwise ops read, runs it.

use crate::custom::CustomOp;
use crate::dtype::DType;
use crate::error::Result;
use crate::tensor::Tensor;

/// Every input cast to the float type `.0`, in as few kernels as the device takes: what
/// autocast's cast cache fills ahead of a forward ([`crate::autocast::cast_ahead`]), where each
/// parameter's own cast would be a dispatch whose launch outweighs its work. Inputs: float
/// tensors (the kernels take contiguous f32 ones). Outputs: each input's cast, in order, shaped
/// like it. [`crate::autocast::cast_ahead`] records each as [`Tensor::to_dtype`] would.
#[derive(Clone, Copy, Debug)]
pub struct CastAll(pub DType);

impl CustomOp for CastAll {
    fn outputs(&self, inputs: &[&Tensor]) -> Vec<(Vec<usize>, DType)> {
        inputs.iter().map(|x| (x.shape().to_vec(), self.0)).collect()
    }

    fn composite(&self, inputs: &[&Tensor]) -> Result<Vec<Tensor>> {
        inputs.iter().map(|x| x.to_dtype(self.0)).collect()
    }
}

crate::custom_kernel_name! {
    CastAll => "cast_all",
}

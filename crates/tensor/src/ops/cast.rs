//! Many casts as one op: autocast's casts of a model's parameters, and of their gradients back.

use crate::autograd::GradFn;
use crate::custom::CustomOp;
use crate::dtype::DType;
use crate::error::Result;
use crate::tensor::Tensor;

/// Several float tensors of one type cast to another float type as one op: how autocast casts
/// a model's parameters at once, and their gradients back (one kernel a cast, each a few
/// hundred elements, was mostly launch cost). Inputs: the tensors, of one dtype and device.
/// Outputs: each cast to `.0`, in its shape.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct CastEach(pub DType);

crate::custom_kernel_name! {
    CastEach => "cast_each",
}

impl CustomOp for CastEach {
    fn outputs(&self, inputs: &[&Tensor]) -> Vec<(Vec<usize>, DType)> {
        inputs.iter().map(|t| (t.shape().to_vec(), self.0)).collect()
    }

    fn composite(&self, inputs: &[&Tensor]) -> Result<Vec<Tensor>> {
        inputs.iter().map(|t| t.to_dtype(self.0)).collect()
    }
}

/// Each of `tensors` cast to `dtype` as [`Tensor::to_dtype`] casts it (each result recorded
/// with its own gradient): the contiguous ones of the first's type and device by one
/// [`CastEach`] where the device has its kernel, the others one by one.
pub(crate) fn cast_each(tensors: &[Tensor], dtype: DType) -> Result<Vec<Tensor>> {
    let Some(first) = tensors.first() else { return Ok(Vec::new()) };
    let from = first.dtype();
    let together = |t: &Tensor| t.dtype() == from && t.device() == first.device() && t.layout().is_contiguous();
    let batch: Vec<usize> = (0..tensors.len()).filter(|&k| together(&tensors[k])).collect();
    let mut out: Vec<Option<Tensor>> = vec![None; tensors.len()];
    if batch.len() > 1 && from.is_float() && dtype.is_float() && from != dtype {
        let refs: Vec<&Tensor> = batch.iter().map(|&k| &tensors[k]).collect();
        if let Some(outs) = crate::fused::run(&CastEach(dtype), &refs) {
            for (&k, cast) in batch.iter().zip(outs?) {
                let t = &tensors[k];
                out[k] = Some(Tensor::from_op(cast.storage(), t.shape(), dtype, t.device(), &[t], || GradFn::Cast { from }));
            }
        }
    }
    tensors.iter().zip(out).map(|(t, cast)| cast.map_or_else(|| t.to_dtype(dtype), Ok)).collect()
}

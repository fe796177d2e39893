//! Many updates of one op as one custom op ([`Foreach`]): what [`super::update_foreach`] hands
//! a device, which runs it as a few multi-tensor dispatches where it can (`gpu.rs`).

use std::sync::Mutex;

use liandan_tensor::{Backend, CustomKernel, CustomOp, DType, Result, Storage, Strided, Tensor};

use super::UpdateOp;

/// The update `op` over several operand lists at once: the inputs are the lists one after
/// another, `operands` each; the outputs every list's outputs in turn, or, `in_place`, none:
/// the kernel writes each list's new values over the buffers of the inputs it updates (the
/// caller hands over only buffers that nothing else holds). `gated` (in place only): one more
/// input, after the lists, the loss scaler's one-element flag, and nothing is written unless
/// it is zero. `after` (gated only): one more input, last, the flag of the step before, and
/// nothing is written unless the device ran that step (`Some(true)`) or skipped it
/// (`Some(false)`). Its composite is `op`'s, list by list.
#[derive(Clone, Debug)]
pub(crate) struct Foreach<U> {
    pub(crate) op: U,
    pub(crate) operands: usize,
    pub(crate) in_place: bool,
    pub(crate) gated: bool,
    pub(crate) after: Option<bool>,
}

impl<U> Foreach<U> {
    /// The operand lists' inputs, without the gates.
    fn lists<'a, T>(&self, inputs: &'a [T]) -> &'a [T] {
        &inputs[..inputs.len() - self.gated as usize - self.after.is_some() as usize]
    }
}

impl<U: UpdateOp> CustomKernel for Foreach<U> {
    fn name(&self) -> &'static str {
        foreach_name(self.op.name())
    }

    fn kernel(&self, backend: &dyn Backend, inputs: &[Strided]) -> Option<Result<Vec<Storage>>> {
        #[cfg(feature = "wgpu")]
        if let Some(gpu) = backend.downcast_ref::<liandan_backend_wgpu::WgpuBackend>() {
            let lists: Vec<Vec<Strided>> = self.lists(inputs).chunks(self.operands).map(<[Strided]>::to_vec).collect();
            let n = inputs.len();
            let trailer = match (self.gated, self.after) {
                (true, Some(ran)) => super::gpu::Trailer::GateAfter(inputs[n - 2], inputs[n - 1], ran),
                (true, None) => super::gpu::Trailer::Gate(inputs[n - 1]),
                _ => super::gpu::Trailer::Nothing,
            };
            return super::gpu::update_foreach(gpu, &self.op.gpu(), &lists, self.in_place, trailer);
        }
        let _ = (backend, inputs);
        None
    }
}

impl<U: UpdateOp> CustomOp for Foreach<U> {
    fn outputs(&self, inputs: &[&Tensor]) -> Vec<(Vec<usize>, DType)> {
        if self.in_place {
            return Vec::new();
        }
        self.lists(inputs).chunks(self.operands).flat_map(|list| self.op.outputs(list)).collect()
    }

    fn composite(&self, inputs: &[&Tensor]) -> Result<Vec<Tensor>> {
        let n = inputs.len();
        if let Some(ran) = self.after {
            if super::gate_closed(inputs[n - 1])? == ran {
                return Ok(Vec::new());
            }
        }
        if self.gated && super::gate_closed(inputs[n - 1 - self.after.is_some() as usize])? {
            return Ok(Vec::new());
        }
        let mut outs = Vec::new();
        for list in self.lists(inputs).chunks(self.operands) {
            let new = self.op.composite(list)?;
            if self.in_place {
                for (&k, value) in self.op.updates().iter().zip(&new) {
                    list[k].assign(value)?;
                }
            } else {
                outs.extend(new);
            }
        }
        Ok(outs)
    }
}

/// `"{op} foreach"`, made once per op (the update ops are few and fixed) so that it lives as
/// long as an op's name does.
fn foreach_name(op: &'static str) -> &'static str {
    static NAMES: Mutex<Vec<(&'static str, &'static str)>> = Mutex::new(Vec::new());
    let mut names = NAMES.lock().unwrap_or_else(|p| p.into_inner());
    if let Some(&(_, name)) = names.iter().find(|(o, _)| *o == op) {
        return name;
    }
    let name: &'static str = Box::leak(format!("{op} foreach").into_boxed_str());
    names.push((op, name));
    name
}

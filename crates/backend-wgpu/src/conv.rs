//! Convolution without column buffers: `ops::Conv2d` and its two gradients as implicit
//! GEMM (`shaders/conv.wgsl`), the tiled product of `shaders/matmul/tile.wgsl` with loaders
//! that gather the im2col columns from the input (or `dy`) as they stage each slice.
//!
//! The weights are permuted to tap-major order first (a copy the size of the weights), so a
//! slice of the column matrix shares one kernel tap when the channels per group are a
//! multiple of 16: one bounds check for 16 rows. f16 and bf16 accumulate in f32; f64 and
//! sizes past 32-bit indexing or one binding are answered `None` (the composite runs).
//!
//! The input gradient of a strided convolution runs by phase (sub-pixel decomposition): the
//! input pixels `(iy, ix)` are split by `(iy mod sh, ix mod sw)`, and a phase's product takes
//! only the taps that reach its pixels (`iy + ph - ky dh` divisible by `sh`), a stride-1
//! correlation of `dy` with those taps. Without it every pixel would run every tap, and all
//! but about `1 / (sh sw)` of them would meet zeros. The pixels of a phase no tap reaches (a
//! strided 1x1 kernel's but one) are cleared, not multiplied.
//!
//! Where every phase has taps (`plan::one_dispatch`), the phases run as one dispatch
//! (`conv/phases.wgsl`): their products differ only in K, their columns and their weights
//! (copied one after another), so one grid holds every phase's tiles, none waits for the one
//! before, and the plan splits K counting all of them. On the H100 resnet18's stride-2 3x3 input
//! gradients took 124-177 us a call so against 179-329 one phase a dispatch. Its strided 1x1
//! shortcuts keep their clear and one product: as one dispatch, its three phases of zeros
//! written by the kernel, its f16 step ran 1.01x as long.
//!
//! Which route a pass takes (Winograd, the columns, the tensor cores or the tiled kernel), and
//! how its products are cut into tiles and splits of K, is `plan/conv.rs`; this runs it.
//!
//! f16 passes run on cooperative matrices (tensor cores) wherever the f16 matmul does
//! (`plan::Caps::coop`) and the pass suits them (`plan/conv.rs`): the same product on
//! `matmul_coop.wgsl`'s tiles ([`CoopKey`]), K split as matmul splits it, with loaders of their
//! own: for the forward and input gradient, b gathered by `conv/gather_coop.wgsl` from the
//! column geometry of `conv/taps.wgsl`; for the weight gradient, dy read by
//! `conv/weight_dy_coop.wgsl` and x by `conv/weight_x_coop.wgsl` through the taps of
//! `conv/weight_taps.wgsl`. (The tiled kernel's loaders read the same geometry files.)
//!
//! f32 passes take the same kernels under `WgpuOptions::conv_tf32` (`LIANDAN_CONV_TF32=1`), as
//! PyTorch's `torch.backends.cudnn.allow_tf32` lets cuDNN take TF32 tensor cores for f32
//! convolutions: each operand is scaled by a power of two that brings its largest magnitude
//! (found by `matmul_coop/amax.wgsl` before the pass) into [2^14, 2^15) and rounded to f16 as
//! it is fetched, which keeps TF32's 11 significant bits; the products are summed in f32 and
//! scaled back as they are stored (`matmul_coop/scaled.wgsl`). Values under 2^-28 of the operand's
//! largest fall among f16's subnormals after the scale and keep fewer bits, those under about
//! 2^-40 none, where TF32 keeps f32's range.
//! Off by default: f32 convolutions are exact f32 unless asked.
//!
//! bf16 passes take them by default (the adapter's cooperative matrices are f16 alone): the
//! packed operands widened as they are fetched, then scaled the same way, and y written in f32
//! words, packed after. A bf16 value's 8
//! significant bits fit f16's 11, so the products are those of the bf16 values, summed in f32,
//! except for values under about 2^-32 of their operand's largest (f16's subnormals).

use std::sync::Arc;

use liandan_tensor::{ConvGeometry, DType, Layout, Result, Storage, Strided};

use crate::backend::{gpu_storage, WgpuBackend};
use crate::gpu::Gpu;
use crate::matmul::coop as matmul_coop;
use crate::matmul::ProductParams;
use crate::packed::{packed_view, Outputs};
use crate::params::words;
use crate::plan::{self, input_phases, one_dispatch, packs_y, Axis, Composite, ConvCall, ConvPlan, Gemm, Pass, Phase, Tiling};
use crate::pool::PooledBuffer;
use crate::storage::WgpuStorage;
use params::ConvParams;
use plan::MAX_PHASES;

mod keys;
mod params;
mod winograd;
pub(crate) use keys::{CoopKey, Key};
pub(crate) use winograd::Key as WinogradKey;

/// The weights `[O, C/G, kh, kw]` as the forward's a operand wants them, as a layout over
/// their buffer: `[G, O/G, taps, C/G]`.
fn forward_weight(g: &ConvGeometry, w: &Layout) -> Layout {
    let (groups, kk) = (g.groups, g.kernel.0 * g.kernel.1);
    let (cg, og) = (g.c / groups, g.o / groups);
    Layout::new(vec![groups, og, kk, cg], vec![og * cg * kk, cg * kk, 1, kk], w.offset())
}

/// One phase's weights as the input gradient's a operand wants them: `[G, C/G, taps y,
/// taps x, O/G]`, the taps `step` apart from the phase's first.
fn phase_weight(g: &ConvGeometry, w: &Layout, ph: &Phase) -> Layout {
    let (groups, kk, kw) = (g.groups, g.kernel.0 * g.kernel.1, g.kernel.1);
    let (cg, og) = (g.c / groups, g.o / groups);
    let shape = vec![groups, cg, ph.y.taps, ph.x.taps, og];
    let strides = vec![og * cg * kk, kk, ph.y.step * kw, ph.x.step, cg * kk];
    Layout::new(shape, strides, w.offset() + ph.y.tap0 * kw + ph.x.tap0)
}

/// Where one product reads its a and b operands, and which pixels of the output it writes.
struct Operands<'a> {
    a: &'a wgpu::Buffer,
    a_off: usize,
    b: &'a wgpu::Buffer,
    b_off: usize,
    phase: Phase,
    /// a and b are packed bf16 (`packed.rs`).
    packed: bool,
    /// The forward's bias and its offset, for the kernel to add as it stores y (packed where
    /// a and b are; see `Tiling::bias_in_kernel`).
    bias: Option<(&'a wgpu::Buffer, usize)>,
    /// ReLU after the bias, in the kernel where the bias is.
    relu: bool,
    /// Every phase of an input gradient in this one product (`conv/phases.wgsl`): each axis's
    /// phases as `ConvParams::phase_y` / `phase_x` hold them; a's weights are the phases'
    /// one after another.
    phases: Option<[[u32; MAX_PHASES]; 2]>,
}

/// Which of the tensor crate's convolution ops (`liandan_tensor::ops::Conv2d`, ...) a call runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum ConvOp {
    Forward,
    Bias,
    BiasRelu,
    Input,
    Weight,
    /// The weight gradient of f16 or bf16 operands summed into f32 (`Conv2dBackwardWeightWide`).
    WeightWide,
}

impl WgpuBackend {
    /// Runs a convolution pass, or `None` (see the module docs).
    pub(crate) fn fused_conv(&self, op: ConvOp, geom: ConvGeometry, inputs: &[Strided]) -> Option<Result<Vec<Storage>>> {
        let pass = match op {
            ConvOp::Forward | ConvOp::Bias | ConvOp::BiasRelu => Pass::Forward,
            ConvOp::Input => Pass::Input,
            ConvOp::Weight | ConvOp::WeightWide => Pass::Weight,
        };
        let wide = op == ConvOp::WeightWide;
        let dtype = inputs.first()?.dtype;
        let relu = op == ConvOp::BiasRelu;
        let operands = if matches!(op, ConvOp::Bias | ConvOp::BiasRelu) { 3 } else { 2 };
        if inputs.len() != operands || inputs.iter().any(|v| v.dtype != dtype || packed_view(v) != packed_view(&inputs[0])) {
            return None;
        }
        let gpu = match self.gpu() {
            Ok(gpu) => gpu,
            Err(e) => return Some(Err(e)),
        };
        let call = ConvCall {
            pass,
            geom,
            dtype,
            plain: operands == 2 && inputs.iter().all(|v| v.layout.is_contiguous()),
            packed: packed_view(&inputs[0]),
            operand_bytes: inputs.iter().map(|v| gpu_storage(v).buffer().size()).max().unwrap_or(0),
            operand_reach: inputs.iter().map(|v| v.layout.max_extent()).max().unwrap_or(0),
        };
        let plan = self.conv_plan(gpu, &call);
        if matches!(plan.composite, Some(Composite::Dtype | Composite::Size)) {
            return None;
        }
        if let Some(winograd) = plan.winograd {
            // bf16 on its f32 kernels, its packed operands read as stored; the result is packed.
            if let Some(done) = self.conv_winograd(pass, &geom, winograd, inputs, wide).map(|r| r.and_then(|out| out.packed(self))) {
                return Some(done);
            }
        }
        // The tensor layer's composite (the product into columns, then col2im) runs it.
        if plan.composite == Some(Composite::Columns) {
            return None;
        }
        let run = |views: &[Strided]| {
            let call = ConvCall { packed: packed_view(&views[0]), ..call };
            match pass {
                Pass::Input => self.conv_input(&call, plan, views),
                _ => self.conv_pass(&call, plan, views, relu, wide),
            }
        };
        // bf16 on the tensor cores: the packed operands widened and scaled into f16 as they are
        // fetched (as TF32's), the results written in f32 words and packed after.
        Some(run(inputs).and_then(|out| out.packed(self)))
    }

    /// `call`'s plan on this device as it runs now.
    fn conv_plan(&self, gpu: &Gpu, call: &ConvCall) -> ConvPlan {
        plan::conv(call, &gpu.caps(), &gpu.options().plan(), None)
    }

    /// The forward or the weight gradient: one product; the forward's bias (a third input)
    /// added and, where `relu`, ReLU after it, in the kernel where the cut allows; `wide`: the
    /// weight gradient of low operands into f32.
    fn conv_pass(&self, call: &ConvCall, plan: ConvPlan, inputs: &[Strided], relu: bool, wide: bool) -> Result<Vec<Storage>> {
        let gpu = self.gpu()?;
        let (geom, dtype) = (&call.geom, call.dtype);
        let gemm = &Gemm::new(call.pass, geom);
        // The a operand: the weights permuted (unless already in that order), or dy.
        let permuted = (gemm.pass == Pass::Forward).then(|| forward_weight(geom, inputs[1].layout));
        let copy = match &permuted {
            Some(l) if !l.is_contiguous() => Some(self.weight_copy(Strided { storage: inputs[1].storage, layout: l, dtype })?),
            _ => None,
        };
        let (a, a_off, b) = match (gemm.pass, &copy) {
            (Pass::Weight, _) => (gpu_storage(&inputs[0]).buffer(), inputs[0].layout.offset(), &inputs[1]),
            (_, Some(c)) => (wgpu_buffer(c), 0, &inputs[0]),
            (_, None) => (gpu_storage(&inputs[1]).buffer(), inputs[1].layout.offset(), &inputs[0]),
        };
        let packed = packed_view(b);
        let out = match wide {
            true => self.output(DType::F32, gemm.total)?,
            false => self.conv_output(gemm, geom, dtype, plan.tiling, packed)?,
        };
        let bias = inputs.get(2).filter(|_| gemm.pass == Pass::Forward);
        // (Packed where the operands are: `fused_conv` takes them packed alike.)
        let in_kernel = bias.map(|v| (gpu_storage(v).buffer(), v.layout.offset()));
        let ops =
            Operands { a, a_off, b: gpu_storage(b).buffer(), b_off: b.layout.offset(), phase: Phase::whole(geom), packed, bias: in_kernel, relu, phases: None };
        let products = [(gemm, ops)];
        let tiling = self.tuned(gpu, call, plan, &products, (gemm.n, gemm.k), &out)?;
        let (av, bv) = if gemm.pass == Pass::Weight { (&inputs[0], &inputs[1]) } else { (&inputs[1], &inputs[0]) };
        let amax = self.scaled_amax(tiling, dtype, av, bv)?;
        if !self.conv_products(&products, geom, dtype, tiling, &out, amax.as_ref().map(|b| b.buffer()))? {
            // The tensor-core kernel failed to build, and f16 has left them for good.
            return self.conv_pass(call, self.conv_plan(gpu, call), inputs, relu, wide);
        }
        // Packed now where the tensor cores wrote f32 words, so that a bias after adds packed
        // words and no f32-word sum is held beside y.
        let out = (Arc::new(out) as Storage).packed(self)?;
        match bias {
            // Cut so that no kernel stores the finished y (or packed): the bias as a broadcast
            // add, and ReLU as its own kernel.
            Some(v) if in_kernel.is_none() || !tiling.bias_in_kernel(dtype) => {
                let y = self.add_bias(out, &geom.output_shape(), v, vec![0, 1, 0, 0])?;
                if !relu {
                    return Ok(vec![y]);
                }
                let shape = geom.output_shape();
                let y = Strided { storage: &*y, layout: &Layout::contiguous(&shape), dtype };
                self.relu_kernel(y).unwrap_or_else(|| Err(liandan_tensor::Error::Device(format!("conv2d_bias_relu: no ReLU kernel for {dtype} {shape:?}"))))
            }
            _ => Ok(vec![out]),
        }
    }

    /// The input gradient: one product per phase (see the module docs), into one output.
    fn conv_input(&self, call: &ConvCall, plan: ConvPlan, inputs: &[Strided]) -> Result<Vec<Storage>> {
        let gpu = self.gpu()?;
        let (geom, dtype) = (&call.geom, call.dtype);
        let (dy, w) = (&inputs[0], &inputs[1]);
        if let Some(axes) = one_dispatch(geom, packed_view(dy)) {
            if let Some(out) = self.conv_input_phases(call, plan, inputs, axes)? {
                return Ok(out);
            }
        }
        let phases = input_phases(geom);
        let gemms: Vec<Gemm> = phases.iter().map(|ph| Gemm::input(geom, ph)).collect();
        // Each phase's weights, copied into the order its product reads them (none for a
        // phase no tap reaches: its pixels are cleared).
        let mut copies = Vec::with_capacity(phases.len());
        for (ph, gemm) in phases.iter().zip(&gemms) {
            let l = phase_weight(geom, w.layout, ph);
            copies.push(if gemm.k > 0 && !l.is_contiguous() { Some(self.weight_copy(Strided { storage: w.storage, layout: &l, dtype })?) } else { None });
        }
        let products: Vec<(&Gemm, Operands)> = phases
            .iter()
            .zip(&gemms)
            .zip(&copies)
            .map(|((&phase, gemm), copy)| {
                let (a, a_off) = match copy {
                    Some(c) => (wgpu_buffer(c), 0),
                    None => (gpu_storage(w).buffer(), phase_weight(geom, w.layout, &phase).offset()),
                };
                (
                    gemm,
                    Operands {
                        a,
                        a_off,
                        b: gpu_storage(dy).buffer(),
                        b_off: dy.layout.offset(),
                        phase,
                        packed: packed_view(dy),
                        bias: None,
                        relu: false,
                        phases: None,
                    },
                )
            })
            .collect();
        // The phases share one output, so one cut (the plan's, for the largest of them).
        let (n, k) = gemms.iter().fold((0, 0), |(n, k), p| (n.max(p.n), k.max(p.k)));
        let out = self.conv_output(&gemms[0], geom, dtype, plan.tiling, packed_view(dy))?;
        let tiling = self.tuned(gpu, call, plan, &products, (n, k), &out)?;
        let amax = self.scaled_amax(tiling, dtype, w, dy)?;
        if !self.conv_products(&products, geom, dtype, tiling, &out, amax.as_ref().map(|b| b.buffer()))? {
            return self.conv_input(call, self.conv_plan(gpu, call), inputs);
        }
        Ok(vec![Arc::new(out) as Storage])
    }

    /// The input gradient of a strided convolution as one product over every phase (see
    /// `one_dispatch`); `None` where the weights' copy cannot run here (the phases then run
    /// one by one).
    fn conv_input_phases(&self, call: &ConvCall, plan: ConvPlan, inputs: &[Strided], (ys, xs): (Vec<Axis>, Vec<Axis>)) -> Result<Option<Vec<Storage>>> {
        let gpu = self.gpu()?;
        let (geom, dtype) = (&call.geom, call.dtype);
        let (dy, w) = (&inputs[0], &inputs[1]);
        let all: Vec<Phase> = ys.iter().flat_map(|&y| xs.iter().map(move |&x| Phase { y, x })).collect();
        // Each phase's weights in the order its product reads them, one phase after another.
        let gemms: Vec<Gemm> = all.iter().map(|ph| Gemm::input(geom, ph)).collect();
        let sizes: Vec<usize> = gemms.iter().map(|g| g.m * g.k * geom.groups).collect();
        let weights = self.output(dtype, sizes.iter().sum::<usize>().max(1))?;
        let mut at = 0;
        for ((ph, gemm), size) in all.iter().zip(&gemms).zip(&sizes) {
            if gemm.k > 0 && ph.y.count * ph.x.count > 0 {
                let view = phase_weight(geom, w.layout, ph);
                let dense = Layout::new(view.shape(), Layout::contiguous(view.shape()).strides(), at);
                if self.copy_into(Strided { storage: w.storage, layout: &view, dtype }, &weights, &dense)?.is_err() {
                    return Ok(None);
                }
            }
            at += size;
        }
        // One product as wide and as deep as the largest phase; the kernel takes each phase's own.
        let widest = gemms.iter().map(|g| g.n).max().unwrap_or(0);
        let deepest = all.iter().zip(&gemms).max_by_key(|(_, g)| g.k).map(|(ph, _)| *ph).unwrap_or(all[0]);
        let gemm = Gemm { n: widest, ..Gemm::input(geom, &deepest) };
        let word = |a: &Axis| a.taps as u32 | ((a.shift as i16 as u16 as u32) << 16);
        let mut table = [[0u32; MAX_PHASES]; 2];
        for (row, axes) in table.iter_mut().zip([&ys, &xs]) {
            for (slot, a) in row.iter_mut().zip(axes.iter()) {
                *slot = word(a);
            }
        }
        let ops = Operands {
            a: weights.buffer(),
            a_off: 0,
            b: gpu_storage(dy).buffer(),
            b_off: dy.layout.offset(),
            phase: deepest,
            packed: false,
            bias: None,
            relu: false,
            phases: Some(table),
        };
        let products = [(&gemm, ops)];
        let out = self.conv_output(&gemm, geom, dtype, plan.tiling, false)?;
        let tiling = self.tuned(gpu, call, plan, &products, (gemm.n, gemm.k), &out)?;
        let amax = self.scaled_amax(tiling, dtype, w, dy)?;
        if !self.conv_products(&products, geom, dtype, tiling, &out, amax.as_ref().map(|b| b.buffer()))? {
            return self.conv_input_phases(call, self.conv_plan(gpu, call), inputs, (ys, xs));
        }
        Ok(Some(vec![Arc::new(out) as Storage]))
    }

    /// The output of products of `gemm`'s pass cut as `tiling` says: packed bf16 where the
    /// kernel writes it so (packed operands, y in vec4s, K not split), else as the kernels
    /// hold the dtype.
    fn conv_output(&self, gemm: &Gemm, geom: &ConvGeometry, dtype: DType, tiling: Tiling, packed: bool) -> Result<WgpuStorage> {
        // The tensor cores' kernels write y in f32 words (bf16 packed after).
        match packs_y(packed && tiling.coop.is_none(), gemm.out4(geom), tiling.splits > 1) {
            true => self.packed_output(gemm.total),
            false => self.output(dtype, gemm.total),
        }
    }

    /// `plan`'s tiling, or where it is tunable and the autotune is on, the cut the autotune
    /// measured on this adapter (`tune.rs`; `(n, k)` those of the largest product), planned
    /// again with it.
    fn tuned(&self, gpu: &Gpu, call: &ConvCall, plan: ConvPlan, products: &[(&Gemm, Operands)], (n, k): (usize, usize), out: &WgpuStorage) -> Result<Tiling> {
        let options = gpu.options();
        let Some(rule) = plan.tunable.filter(|_| options.autotune) else { return Ok(plan.tiling) };
        let (geom, dtype, gemm) = (&call.geom, call.dtype, products[0].0);
        let caps = gpu.caps();
        let candidates = || {
            let groups = |tile: usize| gemm.m.div_ceil(tile) * n.div_ceil(tile) * geom.groups;
            crate::tune::candidates(rule, &[64, 128], k, |tile, splits| crate::tune::split_fits(tile, splits, groups, gemm.total, gpu.max_binding()))
        };
        let shape = crate::tune::Shape::Conv { pass: gemm.pass, dtype, geom: *geom, n, k };
        let at = |cut| plan::conv(call, &caps, &options.plan(), Some(cut)).tiling;
        let cut = gpu.tuned_cut(shape, rule, candidates, |c| self.conv_products(products, geom, dtype, at(c), out, None).map(drop))?;
        Ok(at(cut))
    }

    /// The weights in the order a product reads them: a copy through `view`, packed again
    /// where they are packed bf16 (the product reads a and b alike).
    fn weight_copy(&self, view: Strided) -> Result<Storage> {
        match packed_view(&view) {
            true => liandan_tensor::Backend::copy(self, view),
            false => self.copy_view(view),
        }
    }

    /// For f32 and bf16 products on the tensor cores (`CoopKey::scaled`): the largest magnitudes of
    /// their a and b operands, read from the views `a` and `b` (over the span of each: a bound
    /// where a view skips elements), in a buffer the kernels bind; `None` for other products.
    fn scaled_amax(&self, tiling: Tiling, dtype: DType, a: &Strided, b: &Strided) -> Result<Option<PooledBuffer>> {
        if tiling.coop.is_none() || !matches!(dtype, DType::F32 | DType::BF16) {
            return Ok(None);
        }
        self.operand_amax(a, b, packed_view(a)).map(Some)
    }

    /// Dispatches products that together write every element of `out` once, cut as `tiling`
    /// says (a product with a shorter K leaves its last splits zero), then sums the partial
    /// results when K is split (the kernels store f32 beside low operands only as partial
    /// sums, which for one range of K are `out` itself); `amax`: `scaled_amax`'s buffer, for f32 products on the tensor
    /// cores. `false`: the cooperative-matrix kernel failed to build (and f16 has left the
    /// tensor cores); the caller starts over.
    fn conv_products(
        &self,
        products: &[(&Gemm, Operands)],
        geom: &ConvGeometry,
        dtype: DType,
        tiling: Tiling,
        out: &WgpuStorage,
        amax: Option<&wgpu::Buffer>,
    ) -> Result<bool> {
        let gpu = self.gpu()?;
        let Tiling { bm, bn, splits, coop } = tiling;
        let total = products[0].0.total;
        let partial = splits > 1 || (out.dtype == DType::F32 && dtype != DType::F32);
        // One range of K into an f32 output: the partial sums are the result, written in place.
        let partials = if splits > 1 { Some(gpu.alloc((splits * total * 4) as u64)?) } else { None };
        let y = partials.as_ref().map_or(out.buffer(), |p| p.buffer());
        // Pixels no tap reaches (a phase with no taps) are zeros: one clear, no product.
        if products.iter().any(|(gemm, _)| gemm.k == 0) {
            let bytes = if partial { splits * total * 4 } else { total * gpu.caps().gpu_size(out.dtype) };
            gpu.clear_buffer(y, 0, (bytes as u64).next_multiple_of(4).min(y.size()));
        }
        for (gemm, ops) in products.iter().filter(|(gemm, _)| gemm.k > 0) {
            let (phase, phases) = (gemm.phased(geom), ops.phases.is_some());
            // Every phase's weights (and so every phase's start) in vec4s, where they all are.
            let a4 = gemm.a4(geom, ops.a_off) && (!phases || (geom.o / geom.groups).is_multiple_of(4));
            // The tensor-core kernel stages 32-deep slices: its ranges of K are whole ones.
            let depth = if coop.is_some() { 32 } else { 16 };
            let ks = gemm.k.div_ceil(splits).next_multiple_of(depth).max(depth);
            let bias = ops.bias.filter(|_| tiling.bias_in_kernel(dtype));
            let kernel = match coop {
                Some(variant) => {
                    let (scaled, packed, relu) = (amax.is_some(), ops.packed, bias.is_some() && ops.relu);
                    let key = CoopKey { pass: gemm.pass, variant, a4, partial, phase, phases, scaled, packed, bias: bias.is_some(), relu };
                    match matmul_coop::kernel(gpu, key) {
                        Some(k) => k,
                        None => return Ok(false),
                    }
                }
                None => {
                    let out4 = gemm.out4(geom);
                    debug_assert_eq!(out.is_packed(), packs_y(ops.packed, out4, partial), "the output is packed where the kernel packs it");
                    let key = Key {
                        pass: gemm.pass,
                        dtype,
                        h: bm as u32 / 64,
                        a4,
                        aligned: gemm.aligned,
                        out4,
                        partial,
                        phase,
                        phases,
                        packed: ops.packed,
                        bias: bias.is_some(),
                        relu: bias.is_some() && ops.relu,
                    };
                    gpu.kernel(key)?
                }
            };
            let mut meta = conv_meta(gemm, geom, ops, splits, ks);
            let groups = |count: usize| count.clamp(1, 65_535) as u32;
            let count = if phases { geom.stride.0 * geom.stride.1 } else { 1 };
            let grid = (groups(gemm.n.div_ceil(bn)), groups(gemm.m.div_ceil(bm)), groups(count * geom.groups * splits));
            match (bias, amax) {
                (Some((buffer, offset)), _) => {
                    meta.bias_offset = u32::try_from(offset).expect("binding sizes checked below i32::MAX");
                    gpu.dispatch(&kernel, &words(&meta), &[ops.a, ops.b, y, buffer], grid)?;
                }
                (None, Some(amax)) => gpu.dispatch(&kernel, &words(&meta), &[ops.a, ops.b, y, amax], grid)?,
                _ => gpu.dispatch(&kernel, &words(&meta), &[ops.a, ops.b, y], grid)?,
            }
        }
        if let Some(p) = &partials {
            self.sum_partials(out.dtype, splits, total, p.buffer(), out.buffer())?;
        }
        Ok(true)
    }
}

/// The parameter block of one product ([`ConvParams`], `shaders/conv.wgsl`).
fn conv_meta(gemm: &Gemm, geom: &ConvGeometry, ops: &Operands, splits: usize, ks: usize) -> ConvParams {
    let u = |v: usize| u32::try_from(v).expect("sizes checked below i32::MAX");
    let (kh, kw) = geom.kernel;
    let (ph, input) = (&ops.phase, gemm.pass == Pass::Input);
    // The input gradient reads a phase's taps, stride 1 apart in dy.
    let (taps, stride, dilation) = match input {
        true => ((ph.y.taps, ph.x.taps), (1, 1), (ph.y.dil, ph.x.dil)),
        false => (geom.kernel, geom.stride, geom.dilation),
    };
    // Signed: a phase's first tap may read dy above its first row (the shader's sums wrap).
    let (pad_h, pad_w) = match input {
        true => (ph.y.shift as i32 as u32, ph.x.shift as i32 as u32),
        false => (u(geom.padding.0), u(geom.padding.1)),
    };
    let [g_channels, g_channel_stride, g_image_stride, g_h, g_w, cols_w, cols] = gemm.gather.map(u);
    let [a_group_stride, b_group_stride, y_group_stride] = gemm.strides.map(u);
    let l = geom.out_h() * geom.out_w();
    ConvParams {
        product: ProductParams {
            batch: u(geom.groups),
            m: u(gemm.m),
            k: u(gemm.k),
            n: u(gemm.n),
            a_stride_m: u(gemm.k),
            a_stride_k: 1,
            splits: u(splits),
            split_k: u(ks),
            ..Default::default()
        },
        images: u(geom.n),
        c: u(geom.c),
        h: u(geom.h),
        w: u(geom.w),
        o: u(geom.o),
        kh: u(taps.0),
        kw: u(taps.1),
        pad_h,
        pad_w,
        dil_h: u(dilation.0),
        dil_w: u(dilation.1),
        out_h: u(geom.out_h()),
        out_w: u(geom.out_w()),
        groups: u(geom.groups),
        b_base: u(ops.b_off),
        a_base: u(ops.a_off),
        out_p: u(gemm.p),
        out_rs: u(gemm.rs),
        a_group_stride,
        b_group_stride,
        y_group_stride,
        total: u(gemm.total),
        g_channels,
        g_channel_stride,
        g_image_stride,
        g_h,
        g_w,
        cols_w,
        cols,
        l: u(l),
        dy_image_stride: u(geom.o * l),
        x_image_stride: u(geom.c * geom.h * geom.w),
        x_channel_stride: u(geom.h * geom.w),
        taps: u(kh * kw),
        phase_row_step: u(geom.stride.0 * geom.w),
        phase_col_step: u(geom.stride.1),
        phase_first: u(ph.y.first * geom.w + ph.x.first),
        // Every phase at once: the kernel fills in each phase's fields from these.
        stride_h: if ops.phases.is_some() { u(geom.stride.0) } else { u(stride.0) },
        stride_w: if ops.phases.is_some() { u(geom.stride.1) } else { u(stride.1) },
        phase_y: ops.phases.map_or([0; MAX_PHASES], |t| t[0]),
        phase_x: ops.phases.map_or([0; MAX_PHASES], |t| t[1]),
        ..Default::default()
    }
}

/// The buffer of a storage this backend made.
fn wgpu_buffer(s: &Storage) -> &wgpu::Buffer {
    s.as_any().downcast_ref::<WgpuStorage>().expect("this backend's kernels return its own storage").buffer()
}

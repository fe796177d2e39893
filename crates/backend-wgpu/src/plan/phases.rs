//! A convolution pass as products ([`Gemm`]): the forward, the weight gradient, and the input
//! gradient by phase (sub-pixel decomposition, see `conv.rs`).

use liandan_tensor::ConvGeometry;

use super::Pass;

/// One phase of an input gradient along one axis: the input rows `first + stride * i`
/// (`count` of them) and the kernel taps `tap0 + step * j` (`taps` of them) that reach them;
/// tap j of row i reads dy at row `i + shift - dil * j`. One phase with `step` 1 and the
/// convolution's padding and dilation as `shift` and `dil` is the whole axis.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Axis {
    pub(crate) first: usize,
    pub(crate) count: usize,
    pub(crate) tap0: usize,
    pub(crate) taps: usize,
    pub(crate) step: usize,
    pub(crate) shift: i64,
    pub(crate) dil: usize,
}

impl Axis {
    pub(crate) fn whole(size: usize, k: usize, padding: usize, dilation: usize) -> Axis {
        Axis { first: 0, count: size, tap0: 0, taps: k, step: 1, shift: padding as i64, dil: dilation }
    }

    /// The `s` phases of an axis of `size` pixels under a kernel of `k` taps, stride `s`,
    /// padding `p` and dilation `d`. Row `r + s i` meets tap t where `r + p - t d` is a multiple
    /// of s, at dy row `i + (r + p - t d) / s`; the taps that do so repeat every `s / gcd(s, d)`.
    pub(crate) fn phases(size: usize, k: usize, s: usize, p: usize, d: usize) -> Vec<Axis> {
        let g = gcd(s, d);
        let (step, dil) = (s / g, d / g);
        (0..s)
            .map(|r| {
                let count = if r < size { (size - r).div_ceil(s) } else { 0 };
                let reach = |t: usize| (r + p) as i64 - (t * d) as i64;
                match (0..k.min(step)).find(|&t| reach(t).rem_euclid(s as i64) == 0) {
                    Some(t0) => Axis { first: r, count, tap0: t0, taps: (k - t0).div_ceil(step), step, shift: reach(t0) / s as i64, dil },
                    None => Axis { first: r, count, tap0: 0, taps: 0, step, shift: 0, dil },
                }
            })
            .collect()
    }
}

fn gcd(a: usize, b: usize) -> usize {
    if b == 0 {
        a
    } else {
        gcd(b, a % b)
    }
}

/// The pixels of one product of an input gradient: a phase in y and one in x.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Phase {
    pub(crate) y: Axis,
    pub(crate) x: Axis,
}

impl Phase {
    pub(crate) fn whole(g: &ConvGeometry) -> Phase {
        Phase { y: Axis::whole(g.h, g.kernel.0, g.padding.0, g.dilation.0), x: Axis::whole(g.w, g.kernel.1, g.padding.1, g.dilation.1) }
    }
}

/// The products of an input gradient: one per phase of a strided convolution (every input
/// pixel in exactly one; a phase no tap reaches is zeros, cleared rather than multiplied), or
/// the whole when unstrided. A strided 1x1 kernel is phases too: on the H200 resnet18's
/// shortcuts as one product over every pixel (each tap tested against the stride) ran its f16
/// step 8.94-8.95 ms against 8.78-8.81 so.
pub(crate) fn input_phases(g: &ConvGeometry) -> Vec<Phase> {
    if g.stride == (1, 1) {
        return vec![Phase::whole(g)];
    }
    let ys = Axis::phases(g.h, g.kernel.0, g.stride.0, g.padding.0, g.dilation.0);
    let xs = Axis::phases(g.w, g.kernel.1, g.stride.1, g.padding.1, g.dilation.1);
    let all = ys.iter().flat_map(|&y| xs.iter().map(move |&x| Phase { y, x }));
    all.filter(|p| p.y.count * p.x.count > 0).collect()
}

/// The most phases along one axis (its stride) that one dispatch of an input gradient runs.
pub(crate) const MAX_PHASES: usize = 4;

/// Each axis's phases where a strided input gradient runs as one product over all of them
/// (`conv/phases.wgsl`, see `conv.rs`): strides of at most `MAX_PHASES`, every phase reached
/// by a tap (a strided 1x1 kernel's are mostly cleared instead), tap counts and shifts within
/// 16 bits (the parameter block holds them so), operands not packed (the weights are copied
/// as stored).
pub(crate) fn one_dispatch(g: &ConvGeometry, packed: bool) -> Option<(Vec<Axis>, Vec<Axis>)> {
    let (sh, sw) = g.stride;
    if g.stride == (1, 1) || sh > MAX_PHASES || sw > MAX_PHASES || packed {
        return None;
    }
    let ys = Axis::phases(g.h, g.kernel.0, sh, g.padding.0, g.dilation.0);
    let xs = Axis::phases(g.w, g.kernel.1, sw, g.padding.1, g.dilation.1);
    let fits = |a: &Axis| a.taps > 0 && a.taps <= u16::MAX as usize && i16::try_from(a.shift).is_ok();
    ys.iter().chain(&xs).all(fits).then_some((ys, xs))
}

/// One pass as a product: `[G]` batches of `M x K` times `K x N`, and where its operands are.
pub(crate) struct Gemm {
    pub(crate) pass: Pass,
    pub(crate) m: usize,
    pub(crate) k: usize,
    pub(crate) n: usize,
    /// Per group strides of a, b and y; the output's size; P and RS of `out_at`.
    pub(crate) strides: [usize; 3],
    pub(crate) total: usize,
    pub(crate) p: usize,
    pub(crate) rs: usize,
    /// The gathered operand's channels per group, channel and image strides, height and width,
    /// and the column grid's width and size (forward and input gradient).
    pub(crate) gather: [usize; 7],
    pub(crate) aligned: bool,
}

impl Gemm {
    pub(crate) fn new(pass: Pass, g: &ConvGeometry) -> Gemm {
        let (groups, kk) = (g.groups, g.kernel.0 * g.kernel.1);
        let (cg, og) = (g.c / groups, g.o / groups);
        let (oh, ow) = (g.out_h(), g.out_w());
        let (l, hw) = (oh * ow, g.h * g.w);
        match pass {
            Pass::Forward => Gemm {
                pass,
                m: og,
                k: kk * cg,
                n: g.n * l,
                strides: [og * kk * cg, cg * hw, og * l],
                total: g.n * g.o * l,
                p: l,
                rs: g.o * l,
                gather: [cg, hw, g.c * hw, g.h, g.w, ow, l],
                aligned: cg.is_multiple_of(16),
            },
            Pass::Input => Gemm::input(g, &Phase::whole(g)),
            Pass::Weight => {
                let n = cg * kk;
                Gemm { pass, m: og, k: g.n * l, n, strides: [og * l, cg * hw, og * n], total: g.o * n, p: n, rs: 0, gather: [0; 7], aligned: false }
            }
        }
    }

    /// Whether its a operand, at `a_off`, reads in aligned vec4s: four consecutive k of one
    /// row (for the weight gradient's dy, of one image, so out_h * out_w a multiple of 4 too).
    pub(crate) fn a4(&self, geom: &ConvGeometry, a_off: usize) -> bool {
        let run = if self.pass == Pass::Weight { geom.out_h() * geom.out_w() } else { self.k };
        a_off.is_multiple_of(4) && run.is_multiple_of(4)
    }

    /// Whether a product of this plan writes one phase's pixels (a stride apart).
    pub(crate) fn phased(&self, geom: &ConvGeometry) -> bool {
        self.pass == Pass::Input && geom.stride != (1, 1)
    }

    /// Whether a product of this plan writes y in aligned vec4s.
    pub(crate) fn out4(&self, geom: &ConvGeometry) -> bool {
        !self.phased(geom) && self.p.is_multiple_of(4)
    }

    /// The input gradient's product over one phase's pixels and taps; its a operand is that
    /// phase's weights as `[G, C/G, taps, O/G]`, contiguous.
    pub(crate) fn input(g: &ConvGeometry, ph: &Phase) -> Gemm {
        let (cg, og) = (g.c / g.groups, g.o / g.groups);
        let (oh, ow) = (g.out_h(), g.out_w());
        let (l, hw) = (oh * ow, g.h * g.w);
        let k = ph.y.taps * ph.x.taps * og;
        let cols = ph.y.count * ph.x.count;
        Gemm {
            pass: Pass::Input,
            m: cg,
            k,
            n: g.n * cols,
            strides: [cg * k, og * l, cg * hw],
            total: g.n * g.c * hw,
            p: hw,
            rs: g.c * hw,
            gather: [og, l, g.o * l, oh, ow, ph.x.count, cols],
            aligned: og.is_multiple_of(16),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::Axis;

    /// Every (input row, tap) pair that meets a dy row, found by trying them all, is in exactly
    /// one phase, at the dy row the phase says; no phase holds a pair that meets none.
    #[test]
    fn phases_hold_exactly_the_taps_that_reach() {
        for size in 1..9 {
            for k in 1..6 {
                for s in 1..5 {
                    for p in 0..4 {
                        for d in 1..4 {
                            let mut want: Vec<(usize, usize, i64)> = Vec::new();
                            for row in 0..size {
                                for t in 0..k {
                                    let reach = (row + p) as i64 - (t * d) as i64;
                                    if reach.rem_euclid(s as i64) == 0 {
                                        want.push((row, t, reach.div_euclid(s as i64)));
                                    }
                                }
                            }
                            let phases = Axis::phases(size, k, s, p, d);
                            assert_eq!(phases.iter().map(|a| a.count).sum::<usize>(), size);
                            let mut got = Vec::new();
                            for a in phases {
                                for i in 0..a.count {
                                    for j in 0..a.taps {
                                        got.push((a.first + s * i, a.tap0 + a.step * j, i as i64 + a.shift - (a.dil * j) as i64));
                                    }
                                }
                            }
                            want.sort();
                            got.sort();
                            assert_eq!(got, want, "size {size} k {k} s {s} p {p} d {d}");
                        }
                    }
                }
            }
        }
    }
}

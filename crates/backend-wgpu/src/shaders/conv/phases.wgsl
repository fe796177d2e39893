// Every phase of a strided input gradient in one dispatch (conv.rs): the phases' products
// differ in K, their columns and their weights, and share the output, so one grid takes them
// all and no phase waits for the one before. The launcher's block is p0, with the
// convolution's own strides in stride_h / stride_w and each axis's phases in phase_y /
// phase_x (taps, then the signed tap shift, 16 bits each); `p` is the block of phase
// i = ry * stride_w + rx as the one-product kernel reads it. The phases' weights lie one after
// another from p0.a_base, each [G, C/G, taps, O/G]; a phase no tap reaches writes zeros.

var<private> p: Params;

fn phase_count() -> u32 { return p0.stride_h * p0.stride_w; }

fn phase_taps(e: u32) -> u32 { return e & 0xffffu; }

// The shift as the one-product kernel takes it: signed, as the bits of an i32.
fn phase_shift(e: u32) -> u32 { return bitcast<u32>(bitcast<i32>(e) >> 16u); }

// Weights per tap of a phase: O/G of each of the C/G rows, in each of the G groups.
fn phase_weights(i: u32) -> u32 {
    let e = p0.phase_y[i / p0.stride_w];
    let f = p0.phase_x[i % p0.stride_w];
    return phase_taps(e) * phase_taps(f) * p0.g_channels * p0.m * p0.batch;
}

fn enter_phase(i: u32) {
    p = p0;
    let ry = i / p0.stride_w;
    let rx = i % p0.stride_w;
    let ey = p0.phase_y[ry];
    let ex = p0.phase_x[rx];
    let ty = phase_taps(ey);
    let tx = phase_taps(ex);
    var base = p0.a_base;
    for (var j = 0u; j < i; j++) { base += phase_weights(j); }
    // Rows and columns of the input in this phase (none past the image).
    let rows = select(0u, (p0.h - ry + p0.stride_h - 1u) / p0.stride_h, ry < p0.h);
    let cols = select(0u, (p0.w - rx + p0.stride_w - 1u) / p0.stride_w, rx < p0.w);
    p.k = ty * tx * p0.g_channels;
    p.n = p0.images * rows * cols;
    // A phase without taps multiplies nothing (K = 0); one tap keeps its divisions defined.
    p.kh = max(ty, 1u);
    p.kw = max(tx, 1u);
    p.stride_h = 1u;
    p.stride_w = 1u;
    p.pad_h = phase_shift(ey);
    p.pad_w = phase_shift(ex);
    p.cols_w = cols;
    p.cols = rows * cols;
    p.a_base = base;
    p.a_stride_m = p.k;
    p.a_group_stride = p.k * p0.m;
    p.phase_first = ry * p0.w + rx;
}

// f32 or bf16 operands on the f16 tensor cores (a convolution under `LIANDAN_CONV_TF32` or in
// bf16, conv.rs; a bf16 product, matmul/coop.rs): each operand is multiplied by a power of two
// that brings its largest magnitude into [2^14, 2^15) and rounded to f16 as it is fetched (11
// significant bits: TF32's, and all of bf16's 8), the products are summed in f32, and every
// sum is scaled back as it is stored. amax_ holds the largest magnitudes' f32 bits (a's, then
// b's), found by matmul_coop/amax.wgsl before the pass. Sums go out through workgroup memory
// (the scaling needs each element), rounded or partial alike.
@group(0) @binding(4) var<storage, read> amax_: array<u32>;

const STORE_DIRECT: bool = false;
fn store_frag(c: coop_mat16x16<f32, C>, at: u32) {}

// Each operand's scale, and the inverses that undo them.
var<private> sa_: f32;
var<private> sb_: f32;
var<private> ua_: f32;
var<private> ub_: f32;

// 2^p for p in [-126, 127], exactly.
fn pow2_(p: i32) -> f32 { return bitcast<f32>(u32(p + 127) << 23u); }

// The scale for a largest finite magnitude of f32 bits `bits` (sign clear), and its inverse:
// below 2^(e - 126) for the biased exponent e, so 2^(141 - e) takes it below 2^15 and at least
// to 2^14 (clamped where the magnitude is subnormal). All zeros keep a scale of 1, as would
// bits of an infinity or a NaN (which matmul_coop/amax.wgsl leaves out).
fn scale_of(bits: u32) -> vec2<f32> {
    let e = i32(bits >> 23u);
    if (bits == 0u || e >= 255) { return vec2<f32>(1.0, 1.0); }
    let p = clamp(141 - e, -126, 126);
    return vec2<f32>(pow2_(p), pow2_(-p));
}

fn scale_operands() {
    let a = scale_of(amax_[0]);
    let b = scale_of(amax_[1]);
    sa_ = a.x;
    ua_ = a.y;
    sb_ = b.x;
    ub_ = b.y;
}

// The loss scaler's next scale (`NextScale`), one invocation: the scale times the growth when
// the step's check is 0.0 or -0.0 (read as bits, which a NaN cannot confuse), else times the
// backoff; the product in f32, as `Tensor::mul_scalar` computes it.

@group(0) @binding(1) var<storage, read> scale: array<f32>;
@group(0) @binding(2) var<storage, read> found: array<u32>;
@group(0) @binding(3) var<storage, read_write> next: array<f32>;

@compute @workgroup_size(1)
fn main() {
  let finite = (found[0] & 0x7fffffffu) == 0u;
  next[0] = scale[0] * select(p.backoff, p.growth, finite);
}

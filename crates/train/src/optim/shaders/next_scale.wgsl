// The loss scaler's state after a step (`NextScale`), one invocation. State: the scale, its
// inverse, the good steps since it changed, the steps skipped. The step's check is finite
// when 0.0 or -0.0 (read as bits, which a NaN cannot confuse). Products in f32, as
// `Tensor::mul_scalar` computes them.

@group(0) @binding(1) var<storage, read> state: array<f32>;
@group(0) @binding(2) var<storage, read> found: array<u32>;
@group(0) @binding(3) var<storage, read_write> next: array<f32>;

@compute @workgroup_size(1)
fn main() {
  let finite = (found[0] & 0x7fffffffu) == 0u;
  let counted = select(0.0, state[2] + 1.0, finite);
  let grow = finite && counted >= p.interval;
  next[0] = select(state[0] * p.backoff, select(state[0], state[0] * p.growth, grow), finite);
  next[1] = select(state[1] * p.inv_backoff, select(state[1], state[1] * p.inv_growth, grow), finite);
  next[2] = select(counted, 0.0, grow);
  next[3] = select(state[3] + 1.0, state[3], finite);
}

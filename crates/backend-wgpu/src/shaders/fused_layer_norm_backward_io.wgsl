// The bindings of layer norm's rows' backward kernels (fused_layer_norm_backward.wgsl and
// _fold.wgsl): x, dy, the rows' mean and rstd, the weight (a placeholder without one), dx.

@group(0) @binding(1) var<storage, read> x: array<S_x>;
@group(0) @binding(2) var<storage, read> dy: array<S_x>;
@group(0) @binding(3) var<storage, read> mean: array<S_x>;
@group(0) @binding(4) var<storage, read> rstd: array<S_x>;
@group(0) @binding(5) var<storage, read> weight: array<S_x>;
@group(0) @binding(6) var<storage, read_write> dx: array<S_x>;

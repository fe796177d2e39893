// dst[view 1] = src[view 0]: materializes a strided view, or writes one part of a concat.

@group(0) @binding(1) var<storage, read> src: array<S_x>;
@group(0) @binding(2) var<storage, read_write> dst: array<S_x>;

// Element i, and its store (the entry point is elementwise4.wgsl's).
fn load_(i: u32) -> S_x { return src[offset_of(i, 0u)]; }
fn store_(i: u32, v: S_x) { dst[offset_of(i, 1u)] = v; }

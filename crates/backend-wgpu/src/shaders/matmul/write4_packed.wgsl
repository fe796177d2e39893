// y written as packed bf16 (packed/words.wgsl) in aligned runs of four: the two words of a run
// are this invocation's alone. (Only with OUT4: a scalar store would share its word.)
@group(0) @binding(3) var<storage, read_write> y: array<vec2<u32>>;
fn store_y4(i: u32, v: vec4<C_x>) { y[i / 4u] = vec2<u32>(narrow2_(v.x, v.y), narrow2_(v.z, v.w)); }
// Never called: this file goes with OUT4, whose stores are all store_y4 (tile.wgsl names both).
fn store_y(i: u32, v: C_x) {}

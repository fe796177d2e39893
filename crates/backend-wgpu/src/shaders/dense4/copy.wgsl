// dst = src over dense f32 or f16 views, in vec4s (the meta block is the strided one of one
// dimension: src's offset at params[4], dst's at params[6]).

@group(0) @binding(1) var<storage, read> src: array<vec4<S_x>>;
@group(0) @binding(2) var<storage, read_write> dst: array<vec4<S_x>>;

fn run4_(j: u32) {
    dst[params[6] / 4u + j] = src[params[4] / 4u + j];
}

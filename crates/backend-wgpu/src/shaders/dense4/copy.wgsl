// dst = src over dense f32 or f16 views, in vec4s (`Dense4Params`: src's offset is p.a_offset,
// dst's p.b_offset).

@group(0) @binding(1) var<storage, read> src: array<vec4<S_x>>;
@group(0) @binding(2) var<storage, read_write> dst: array<vec4<S_x>>;

fn run4_(j: u32) {
    dst[p.b_offset / 4u + j] = src[p.a_offset / 4u + j];
}

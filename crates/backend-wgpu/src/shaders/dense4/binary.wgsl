// out = op_(a, b) over dense f32 or f16 operands, in vec4s (`op_` from the op's file in binary/,
// computing in C_x; `Dense4Params`: the offsets are p.a_offset and p.b_offset).

@group(0) @binding(1) var<storage, read> lhs: array<vec4<S_x>>;
@group(0) @binding(2) var<storage, read> rhs: array<vec4<S_x>>;
@group(0) @binding(3) var<storage, read_write> out: array<vec4<S_x>>;

fn run4_(j: u32) {
    let a = lhs[p.a_offset / 4u + j];
    let b = rhs[p.b_offset / 4u + j];
    out[j] = vec4<S_x>(
        store_x(op_(load_x(a.x), load_x(b.x))),
        store_x(op_(load_x(a.y), load_x(b.y))),
        store_x(op_(load_x(a.z), load_x(b.z))),
        store_x(op_(load_x(a.w), load_x(b.w))),
    );
}

// y = op_(x) over a dense f32 or f16 x, in vec4s (`op_` from the op's file in unary/, computing
// in C_x; `Dense4Params`: x's offset is p.a_offset).

@group(0) @binding(1) var<storage, read> x: array<vec4<S_x>>;
@group(0) @binding(2) var<storage, read_write> y: array<vec4<S_x>>;

fn run4_(j: u32) {
    let a = x[p.a_offset / 4u + j];
    y[j] = vec4<S_x>(store_x(op_(load_x(a.x))), store_x(op_(load_x(a.y))), store_x(op_(load_x(a.z))), store_x(op_(load_x(a.w))));
}

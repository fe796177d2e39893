// y = op_(x) over a dense f32 x, in vec4s (`op_` from the op's file in unary/; the meta block is
// the strided one of one dimension: x's offset at params[4]).

@group(0) @binding(1) var<storage, read> x: array<vec4<f32>>;
@group(0) @binding(2) var<storage, read_write> y: array<vec4<f32>>;

fn run4_(j: u32) {
    let a = x[params[4] / 4u + j];
    y[j] = vec4<f32>(op_(a.x), op_(a.y), op_(a.z), op_(a.w));
}

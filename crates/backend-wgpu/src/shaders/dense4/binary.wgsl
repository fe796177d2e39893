// out = op_(a, b) over dense f32 operands, in vec4s (`op_` from the op's file in binary/; the
// meta block is the strided one of one dimension: the offsets at params[4] and params[6]).

@group(0) @binding(1) var<storage, read> lhs: array<vec4<f32>>;
@group(0) @binding(2) var<storage, read> rhs: array<vec4<f32>>;
@group(0) @binding(3) var<storage, read_write> out: array<vec4<f32>>;

fn run4_(j: u32) {
    let a = lhs[params[4] / 4u + j];
    let b = rhs[params[6] / 4u + j];
    out[j] = vec4<f32>(op_(a.x, b.x), op_(a.y, b.y), op_(a.z, b.z), op_(a.w, b.w));
}

// out = f(a, b) elementwise over broadcast (stride-0) operands; f is substituted for {{EXPR}}.

@group(0) @binding(1) var<storage, read> lhs: array<S_x>;
@group(0) @binding(2) var<storage, read> rhs: array<S_x>;
@group(0) @binding(3) var<storage, read_write> out: array<S_x>;

// PyTorch's pow: negative bases with integral exponents keep their sign; others are NaN.
fn pow_(a: C_x, b: C_x) -> C_x {
    if (a >= C_x(0)) {
        if (a == C_x(0) && b == C_x(0)) { return C_x(1); }
        return pow(a, b);
    }
    if (b != floor(b)) { return (a - a) / (a - a); }
    let m = pow(-a, b);
    if (b - C_x(2) * floor(b / C_x(2)) == C_x(1)) { return -m; }
    return m;
}

// maximum/minimum propagate NaN, as PyTorch's. (`x != x` is not a NaN test here: `!=`
// compiles to an ordered comparison, false when either side is NaN.)
fn maximum_(a: C_x, b: C_x) -> C_x {
    if (!(a == a) || !(b == b)) { return a + b; }
    return max(a, b);
}

fn minimum_(a: C_x, b: C_x) -> C_x {
    if (!(a == a) || !(b == b)) { return a + b; }
    return min(a, b);
}

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
    let i = flat_id(wid, nwg, lid);
    if (i >= params[0]) { return; }
    let a = load_x(lhs[offset_of(i, 0u)]);
    let b = load_x(rhs[offset_of(i, 1u)]);
    out[i] = store_x({{EXPR}});
}

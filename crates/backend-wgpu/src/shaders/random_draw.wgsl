// Seeded random draws, bit-for-bit the generator of liandan-tensor's `rng.rs`: element i
// depends only on (seed, i). `RandomParams`: p.kind is 0 uniform, 1 normal, 2 bernoulli, and
// (p.a, p.b) = (low, high - low), (mean, std) or (p, -). The fills (random.wgsl, and
// packed/random.wgsl for packed bf16) follow this file.

fn hash32(v: u32) -> u32 {
    var x = v;
    x ^= x >> 16u;
    x *= 0x7feb352du;
    x ^= x >> 15u;
    x *= 0x846ca68bu;
    x ^= x >> 16u;
    return x;
}

fn draw(counter: u32) -> u32 {
    let key = hash32(p.seed_lo ^ hash32(p.seed_hi ^ 0x9e3779b9u));
    let rot = (counter << 16u) | (counter >> 16u);
    return hash32(counter ^ hash32((key + rot) ^ 0x85ebca6bu));
}

fn uniform01(counter: u32) -> f32 {
    return f32(draw(counter) >> 8u) * (1.0 / 16777216.0);
}

// Element i of the tensor.
fn random_(i: u32) -> f32 {
    let a = p.a;
    let b = p.b;
    switch p.kind {
        case 0u: { return a + b * uniform01(i); }
        case 1u: {
            let u1 = uniform01(i * 2u) + 1.0 / 16777216.0;
            let u2 = uniform01(i * 2u + 1u);
            return a + b * sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2);
        }
        default: { return select(0.0, 1.0, uniform01(i) < a); }
    }
}

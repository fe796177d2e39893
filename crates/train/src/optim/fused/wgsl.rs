//! The WGSL text of the multi-tensor and in-place update kernels, made from the per-tensor
//! kernel's own files (see [`super::gpu`]): copies with their names suffixed and bindings
//! moved, and outputs folded into their inputs.

use liandan_backend_wgpu::Shader;

/// What a multi-tensor kernel binds after every tensor slot's (`gpu::Trailer`'s kind), which
/// keys its pipeline and shapes its WGSL.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Trailing {
    Nothing = 0,
    Gate = 1,
    Check = 2,
    ScaledCheck = 3,
    /// The gate, then the last step's, the kernel running only where that step ran.
    GateAfterRan = 4,
    /// The gate, then the last step's, the kernel running only where the device skipped it.
    GateAfterSkipped = 5,
}

const FOREACH: &str = include_str!("../shaders/foreach.wgsl");

/// The WGSL of a `width`-wide update: `head` (types, constants, the parameter block), the
/// update's files `body` once per tensor slot (copy k: every function and binding it declares
/// named `name_k`, bindings numbered from `1 + k * bindings`), `update_at`, `update4_at`
/// (the body's `update4` where it declares one), `skipped`, the
/// bindings after every slot's that `trailing` asks for (the gates `skipped` reads, or the check
/// `found_nonfinite` marks, after the scaler's state where the factor is read from there), and
/// the entry point.
pub(crate) fn foreach_source(head: Shader, body: &str, width: usize, bindings: usize, trailing: Trailing) -> String {
    let names = declared(body);
    let mut s = head.uint("CHUNK", width as u32).build();
    for k in 0..width {
        let mut copy = shift_bindings(body, k * bindings);
        for name in &names {
            copy = rename(&copy, name, &format!("{name}_{k}"));
        }
        s += "\n";
        s += &copy;
    }
    s += "\n// Copy k of the update on element e.\nfn update_at(k: u32, e: u32) {\n  switch k {\n";
    for k in 0..width {
        s += &format!("    case {k}u: {{ update_{k}(e); }}\n");
    }
    s += "    default: {}\n  }\n}\n\n";
    // Elements e, e + 256, e + 512 and e + 768 of copy k (a whole block: foreach.wgsl).
    s += "fn update4_at(k: u32, e: u32) {\n";
    if names.iter().any(|n| n == "update4") {
        s += "  switch k {\n";
        for k in 0..width {
            s += &format!("    case {k}u: {{ update4_{k}(e); }}\n");
        }
        s += "    default: {}\n  }\n}\n\n";
    } else {
        s += "  for (var r = 0u; r < 4u; r++) {\n    update_at(k, e + 256u * r);\n  }\n}\n\n";
    }
    let trailer = 1 + width * bindings;
    match trailing {
        Trailing::Nothing => s += "fn skipped() -> bool { return false; }\n\n",
        Trailing::Gate => {
            s += &format!("@group(0) @binding({trailer}) var<storage, read> gate: array<u32>;\n");
            s += "fn skipped() -> bool { return (gate[0] & 0x7fffffffu) != 0u; }\n\n";
        }
        Trailing::GateAfterRan | Trailing::GateAfterSkipped => {
            s += &format!("@group(0) @binding({trailer}) var<storage, read> gate: array<u32>;\n");
            s += &format!("@group(0) @binding({}) var<storage, read> last_gate: array<u32>;\n", trailer + 1);
            let last = if trailing == Trailing::GateAfterRan { "!=" } else { "==" };
            s += &format!("fn skipped() -> bool {{ return (gate[0] & 0x7fffffffu) != 0u || (last_gate[0] & 0x7fffffffu) {last} 0u; }}\n\n");
        }
        Trailing::Check | Trailing::ScaledCheck => {
            let mut found = trailer;
            if trailing == Trailing::ScaledCheck {
                // The loss scaler's state on the device: its element 1 is the inverse scale.
                s += &format!("@group(0) @binding({trailer}) var<storage, read> scaler: array<f32>;\n");
                s += "fn unscale_factor() -> f32 { return scaler[1]; }\n";
                found += 1;
            } else {
                s += "fn unscale_factor() -> f32 { return p.factor; }\n";
            }
            s += &format!("@group(0) @binding({found}) var<storage, read_write> found: array<atomic<u32>>;\n");
            s += "fn skipped() -> bool { return false; }\n";
            // A NaN's bits: the flag the composite's sum of `x * 0` leaves.
            s += "fn found_nonfinite() { atomicOr(&found[0], 0x7fc00000u); }\n\n";
        }
    }
    s + FOREACH
}

/// The update's files `src` made to write over their inputs: each output binding `x_out`
/// folds into its input `x` (or `x_in`), which becomes `read_write`, and the bindings that
/// remain are numbered 1, 2, ... in the order they are declared (the input order). Every
/// update reads an element of a buffer before it writes that element, and only that one, so
/// the arithmetic is the fresh-buffer kernel's.
pub(crate) fn in_place(src: &str) -> String {
    // (read_write, name, element type) of a binding's declaration line.
    let binding = |line: &str| -> Option<(bool, String, String)> {
        let (_, rest) = line.strip_prefix("@group(0) @binding(")?.split_once(") var<storage, ")?;
        let (access, rest) = rest.split_once("> ")?;
        let (name, ty) = rest.split_once(": ")?;
        Some((access == "read_write", name.trim().to_string(), ty.to_string()))
    };
    let declared: Vec<(bool, String, String)> = src.lines().filter_map(binding).collect();
    let is_input = |n: &str| declared.iter().any(|d| !d.0 && d.1 == n);
    // (output, the input it folds into)
    let folds: Vec<(String, String)> = declared
        .iter()
        .filter(|d| d.0)
        .filter_map(|d| {
            let base = d.1.strip_suffix("_out")?;
            let input = [base.to_string(), format!("{base}_in")].into_iter().find(|n| is_input(n))?;
            Some((d.1.clone(), input))
        })
        .collect();
    let mut out = String::with_capacity(src.len());
    let mut next = 1;
    for line in src.lines() {
        match binding(line) {
            Some((_, name, _)) if folds.iter().any(|f| f.0 == name) => continue,
            Some((write, name, ty)) => {
                let access = if write || folds.iter().any(|f| f.1 == name) { "read_write" } else { "read" };
                out += &format!("@group(0) @binding({next}) var<storage, {access}> {name}: {ty}\n");
                next += 1;
            }
            None => {
                out += line;
                out += "\n";
            }
        }
    }
    folds.iter().fold(out, |s, (from, to)| rename(&s, from, to))
}

/// The functions, constants and bindings `src` declares.
fn declared(src: &str) -> Vec<String> {
    let ident = |rest: &str| rest.split(|c: char| !(c.is_alphanumeric() || c == '_')).next().unwrap_or_default().to_string();
    let mut names = Vec::new();
    for line in src.lines() {
        if let Some(rest) = line.strip_prefix("fn ").or_else(|| line.strip_prefix("const ")) {
            names.push(ident(rest));
        } else if let Some((_, rest)) = line.strip_prefix("@group(0) @binding(").and_then(|l| l.split_once("> ")) {
            names.push(ident(rest));
        }
    }
    names
}

/// `src` with every `@binding(n)` made `@binding(n + by)`.
fn shift_bindings(src: &str, by: usize) -> String {
    if by == 0 {
        return src.to_string();
    }
    let mut out = String::with_capacity(src.len());
    let mut rest = src;
    while let Some(at) = rest.find("@binding(") {
        let open = at + "@binding(".len();
        let close = open + rest[open..].find(')').unwrap_or(0);
        out += &rest[..close];
        out += &format!(" + {by}u");
        rest = &rest[close..];
    }
    out + rest
}

/// `src` with the identifier `from` (where it is a whole word) replaced by `to`.
fn rename(src: &str, from: &str, to: &str) -> String {
    let is_ident = |c: char| c.is_alphanumeric() || c == '_';
    let mut out = String::with_capacity(src.len() + 256);
    let mut rest = src;
    while let Some(at) = rest.find(from) {
        let end = at + from.len();
        let whole = !rest[..at].ends_with(is_ident) && !rest[end..].starts_with(is_ident);
        out += &rest[..at];
        out += if whole { to } else { from };
        rest = &rest[end..];
    }
    out + rest
}

#[cfg(test)]
mod tests {
    use super::{declared, in_place, rename, shift_bindings};

    #[test]
    fn copies_rename_whole_words_and_shift_bindings() {
        let src = "@group(0) @binding(GRAD_AVG + 1u) var<storage, read> exp_avg_sq: array<S_x>;\nconst BIT: u32 = 4u;\nfn update(e: u32) { max_exp_avg_sq[e] = exp_avg_sq[e] + p.eps; }\n";
        assert_eq!(declared(src), ["exp_avg_sq", "BIT", "update"]);
        let copy = rename(&rename(&shift_bindings(src, 9), "exp_avg_sq", "exp_avg_sq_2"), "update", "update_2");
        assert_eq!(copy, "@group(0) @binding(GRAD_AVG + 1u + 9u) var<storage, read> exp_avg_sq_2: array<S_x>;\nconst BIT: u32 = 4u;\nfn update_2(e: u32) { max_exp_avg_sq[e] = exp_avg_sq_2[e] + p.eps; }\n");
    }

    #[test]
    fn in_place_folds_each_output_into_its_input_and_renumbers() {
        let src = "\
@group(0) @binding(1) var<storage, read> param: array<S_x>;
@group(0) @binding(2) var<storage, read> grad: array<S_x>;
@group(0) @binding(3) var<storage, read> sum_in: array<S_x>;
@group(0) @binding(4) var<storage, read_write> param_out: array<S_x>;
@group(0) @binding(5) var<storage, read_write> sum_out: array<S_x>;
fn update(e: u32) { sum_out[e] = sum_in[e] + grad[e]; param_out[e] = param[e] - sum_out[e]; }
@group(0) @binding(GRAD_AVG) var<storage, read> grad_avg: array<S_x>;
@group(0) @binding(GRAD_AVG + 1u) var<storage, read_write> grad_avg_out: array<S_x>;
";
        let want = "\
@group(0) @binding(1) var<storage, read_write> param: array<S_x>;
@group(0) @binding(2) var<storage, read> grad: array<S_x>;
@group(0) @binding(3) var<storage, read_write> sum_in: array<S_x>;
fn update(e: u32) { sum_in[e] = sum_in[e] + grad[e]; param[e] = param[e] - sum_in[e]; }
@group(0) @binding(4) var<storage, read_write> grad_avg: array<S_x>;
";
        assert_eq!(in_place(src), want);
    }
}

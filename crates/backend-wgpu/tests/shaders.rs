//! Every shader this backend can build passes naga's validation, and translates to Metal
//! Shading Language, so what runs on Vulkan here also compiles for Apple GPUs (which have f16
//! but no f64). The variants come from the typed kernel keys that also key the pipeline cache
//! (`shaders::all_sources`). No GPU needed.
//!
//! The f16 matmul on cooperative matrices (`matmul_coop.wgsl`, the sources that enable
//! `wgpu_cooperative_matrix`) is validated with naga's cooperative-matrix capability but not
//! translated to MSL: it is written for 16 x 16 matrices, and Metal's simdgroup matrices are
//! 8 x 8 (naga would write a `simdgroup_half16x16` that Metal does not have). No Metal adapter
//! reports a 16 x 16 configuration, so `coop.rs` never picks it there.

use naga::back::msl;
use naga::valid::{Capabilities, ValidationFlags, Validator};

/// Whether a source is a cooperative-matrix kernel (see the module docs).
fn cooperative(src: &str) -> bool {
    src.contains("enable wgpu_cooperative_matrix;")
}

/// Whether a source takes subgroup operations (built where the device has `SUBGROUP`; naga
/// takes them without an `enable`).
fn subgroups(src: &str) -> bool {
    src.contains("subgroupAdd(") || src.contains("subgroupShuffleXor(")
}

fn validate(name: &str, src: &str, caps: Capabilities) -> (naga::Module, naga::valid::ModuleInfo) {
    let caps = if cooperative(src) { caps | Capabilities::COOPERATIVE_MATRIX } else { caps };
    let caps = if subgroups(src) { caps | Capabilities::SUBGROUP } else { caps };
    let module = naga::front::wgsl::parse_str(src).unwrap_or_else(|e| panic!("{name}: WGSL parse error:\n{}\n{src}", e.emit_to_string(src)));
    let mut validator = Validator::new(ValidationFlags::all(), caps);
    validator.subgroup_stages(naga::valid::ShaderStages::COMPUTE).subgroup_operations(naga::valid::SubgroupOperationSet::all());
    let info = validator.validate(&module).unwrap_or_else(|e| panic!("{name}: naga validation failed: {e:?}\n{src}"));
    (module, info)
}

#[test]
fn every_shader_validates_with_f16_and_f64() {
    let sources = liandan_backend_wgpu::shaders::all_sources(true, true, false);
    assert!(sources.len() > 100, "expected every op x dtype variant, got {}", sources.len());
    let names: std::collections::HashSet<&String> = sources.iter().map(|s| &s.0).collect();
    assert_eq!(names.len(), sources.len(), "two kernel keys print alike");
    assert!(sources.iter().any(|(_, src)| cooperative(src)), "the cooperative-matrix f16 matmul is missing");
    for (name, src) in &sources {
        assert!(!src.contains("{{"), "{name}: an unfilled placeholder");
        // Kernels read their parameters by name, from the struct generated for their block.
        assert!(src.contains(": Params;") && !src.contains("params["), "{name}: a parameter read by position");
        validate(name, src, Capabilities::SHADER_FLOAT16 | Capabilities::FLOAT64);
    }
}

#[test]
fn every_shader_validates_without_f16_or_f64() {
    for (name, src) in &liandan_backend_wgpu::shaders::all_sources(false, false, false) {
        // pack2x16float needs only the f16-in-f32 downlevel capability, which Vulkan, Metal and DX12 all have.
        validate(name, src, Capabilities::SHADER_FLOAT16_IN_FLOAT32);
    }
}

#[test]
fn every_metal_shader_translates_to_msl() {
    // Metal takes the meta block as immediate data (wgpu offers 4 KiB of it there).
    let sources = liandan_backend_wgpu::shaders::all_sources(true, false, true);
    for (name, src) in sources.iter().filter(|(_, src)| !cooperative(src)) {
        let (module, info) = validate(name, src, Capabilities::SHADER_FLOAT16 | Capabilities::IMMEDIATES);
        let options = msl::Options { lang_version: (2, 4), ..Default::default() };
        let pipeline = msl::PipelineOptions::default();
        let (msl_src, _) = msl::write_string(&module, &info, &options, &pipeline).unwrap_or_else(|e| panic!("{name}: MSL translation failed: {e:?}"));
        assert!(msl_src.contains("kernel void"), "{name}: no compute entry point in the MSL output");
    }
}

/// Where the device takes the meta block as immediate data (an H200 through Vulkan; lavapipe,
/// which runs the tests here, offers 128 bytes, too few for a block, and so runs the storage
/// variants), every kernel is built with `var<immediate>`: each validates and goes through
/// naga's SPIR-V writer as wgpu's Vulkan backend takes it (without run-time checks, and with
/// the clamps wgpu adds when they are on).
#[test]
fn every_shader_with_immediate_params_translates_to_spirv() {
    let sources = liandan_backend_wgpu::shaders::all_sources(true, true, true);
    for (name, src) in &sources {
        // (`p0` in the kernels that fill a private `p` from it, conv/phases.wgsl.)
        let immediate = ["p", "p0"].iter().any(|n| src.contains(&format!("var<immediate> {n}: Params;")));
        assert!(immediate, "{name}: the parameter block is not immediate data");
        let (module, info) = validate(name, src, Capabilities::SHADER_FLOAT16 | Capabilities::FLOAT64 | Capabilities::IMMEDIATES);
        for policy in [naga::proc::BoundsCheckPolicy::Unchecked, naga::proc::BoundsCheckPolicy::Restrict] {
            let bounds = naga::proc::BoundsCheckPolicies { index: policy, buffer: policy, image_load: policy, ..Default::default() };
            let options = naga::back::spv::Options { lang_version: (1, 6), bounds_check_policies: bounds, ..Default::default() };
            naga::back::spv::write_vec(&module, &info, &options, None).unwrap_or_else(|e| panic!("{name}: SPIR-V translation failed: {e:?}"));
        }
    }
}

/// The cooperative-matrix kernels also go through naga's SPIR-V writer, as wgpu's Vulkan backend
/// takes them (the only backend that runs them; lavapipe has no cooperative matrices, so this
/// is as far as they get on a machine without a GPU that has them), with the index clamps wgpu
/// adds on Vulkan when the checks are on (`LIANDAN_SHADER_CHECKS=1`; without them the module
/// only loses its clamps). With `LIANDAN_SPIRV_DUMP=dir` each module is written there as `<n>.spv` (the key
/// in `<n>.txt`), for `spirv-val --target-env vulkan1.3` to check further.
#[test]
fn cooperative_shaders_translate_to_spirv() {
    let sources = liandan_backend_wgpu::shaders::all_sources(true, false, false);
    let dump = liandan_tensor::settings::SPIRV_DUMP.path_in(&liandan_tensor::settings::env).unwrap_or_else(|e| panic!("{e}"));
    let mut translated = 0;
    for (name, src) in sources.iter().filter(|(_, src)| cooperative(src)) {
        let (module, info) = validate(name, src, Capabilities::SHADER_FLOAT16);
        let restrict = naga::proc::BoundsCheckPolicy::Restrict;
        let bounds = naga::proc::BoundsCheckPolicies { index: restrict, buffer: restrict, image_load: restrict, ..Default::default() };
        let options = naga::back::spv::Options { lang_version: (1, 6), bounds_check_policies: bounds, ..Default::default() };
        let words = naga::back::spv::write_vec(&module, &info, &options, None).unwrap_or_else(|e| panic!("{name}: SPIR-V translation failed: {e:?}"));
        assert!(words.len() > 100, "{name}: a suspiciously short SPIR-V module");
        if let Some(dir) = &dump {
            let bytes: Vec<u8> = words.iter().flat_map(|w| w.to_le_bytes()).collect();
            std::fs::write(dir.join(format!("{translated}.spv")), bytes).unwrap();
            std::fs::write(dir.join(format!("{translated}.txt")), name).unwrap();
        }
        translated += 1;
    }
    assert!(translated > 0, "no cooperative-matrix kernel found");
}

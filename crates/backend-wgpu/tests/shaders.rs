//! Every shader this backend can build passes naga's validation, and translates to Metal
//! Shading Language, so what runs on Vulkan here also compiles for Apple GPUs (which have f16
//! but no f64). The variants come from the typed kernel keys that also key the pipeline cache
//! (`shaders::all_sources`). No GPU needed.

use naga::back::msl;
use naga::valid::{Capabilities, ValidationFlags, Validator};

fn validate(name: &str, src: &str, caps: Capabilities) -> (naga::Module, naga::valid::ModuleInfo) {
    let module = naga::front::wgsl::parse_str(src).unwrap_or_else(|e| panic!("{name}: WGSL parse error:\n{}\n{src}", e.emit_to_string(src)));
    let info = Validator::new(ValidationFlags::all(), caps).validate(&module).unwrap_or_else(|e| panic!("{name}: naga validation failed: {e:?}\n{src}"));
    (module, info)
}

#[test]
fn every_shader_validates_with_f16_and_f64() {
    let sources = liandan_backend_wgpu::shaders::all_sources(true, true);
    assert!(sources.len() > 100, "expected every op x dtype variant, got {}", sources.len());
    let names: std::collections::HashSet<&String> = sources.iter().map(|s| &s.0).collect();
    assert_eq!(names.len(), sources.len(), "two kernel keys print alike");
    for (name, src) in &sources {
        assert!(!src.contains("{{"), "{name}: an unfilled placeholder");
        validate(name, src, Capabilities::SHADER_FLOAT16 | Capabilities::FLOAT64);
    }
}

#[test]
fn every_shader_validates_without_f16_or_f64() {
    for (name, src) in &liandan_backend_wgpu::shaders::all_sources(false, false) {
        // pack2x16float needs only the f16-in-f32 downlevel capability, which Vulkan, Metal and DX12 all have.
        validate(name, src, Capabilities::SHADER_FLOAT16_IN_FLOAT32);
    }
}

#[test]
fn every_metal_shader_translates_to_msl() {
    let sources = liandan_backend_wgpu::shaders::all_sources(true, false);
    for (name, src) in &sources {
        let (module, info) = validate(name, src, Capabilities::SHADER_FLOAT16);
        let options = msl::Options { lang_version: (2, 4), ..Default::default() };
        let pipeline = msl::PipelineOptions::default();
        let (msl_src, _) = msl::write_string(&module, &info, &options, &pipeline).unwrap_or_else(|e| panic!("{name}: MSL translation failed: {e:?}"));
        assert!(msl_src.contains("kernel void"), "{name}: no compute entry point in the MSL output");
    }
}

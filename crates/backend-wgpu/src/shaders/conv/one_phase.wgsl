// One product a dispatch: `p` is the launcher's block as it stands (see conv/phases.wgsl).
fn phase_count() -> u32 { return 1u; }
fn enter_phase(i: u32) {}

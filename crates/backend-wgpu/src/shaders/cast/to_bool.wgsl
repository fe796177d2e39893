// Every nonzero integer converts to a nonzero float, so one test serves every source.
fn convert_(v: S_x) -> u32 { return select(0u, 1u, wide_(v) != W(0)); }

fn convert_(v: S_x) -> S_y { return store_y(C_y(wide_(v))); }

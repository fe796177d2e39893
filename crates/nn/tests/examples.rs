//! The examples are what a user copies into a program that depends on liandan-nn alone: they
//! may name no other crate of the workspace (`use liandan_backend_wgpu as _;` in such a
//! program does not compile, E0432). Cargo builds them with every dependency of this crate in
//! reach, so this is checked here.

#[path = "common/examples.rs"]
mod examples;

#[test]
fn the_examples_name_only_liandan_nn() {
    examples::examples_name_only(&["liandan_nn"], "that depends on liandan-nn");
}

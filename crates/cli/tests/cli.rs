//! The `liandan` command, run as a user runs it.

use std::process::{Command, Output};

fn liandan(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_liandan")).args(args).output().expect("the liandan binary runs")
}

fn text(o: &Output) -> (String, String) {
    (String::from_utf8_lossy(&o.stdout).into_owned(), String::from_utf8_lossy(&o.stderr).into_owned())
}

#[test]
fn zoo_lists_the_seven_models_with_their_parameter_counts() {
    let o = liandan(&["zoo"]);
    let (out, _) = text(&o);
    assert!(o.status.success());
    for (name, params) in [("mlp", "658698"), ("mnist_cnn", "1199882"), ("seed003_cnn", "831626"), ("resnet18", "11173962"), ("vit", "2693578"), ("lstm", "295434"), ("vae", "652824")] {
        let line = out.lines().find(|l| l.starts_with(&format!("{name} "))).unwrap_or_else(|| panic!("{name} missing:\n{out}"));
        assert!(line.contains(params), "{line}");
    }
}

#[test]
fn summary_prints_the_layers_of_a_zoo_model() {
    let o = liandan(&["summary", "lstm", "--batch", "4"]);
    let (out, err) = text(&o);
    assert!(o.status.success(), "{err}");
    assert!(out.contains("LSTM-1") && out.contains("[4, 28, 256]"), "{out}");
    assert!(out.contains("Linear-2") && out.contains("[4, 10]"), "{out}");
    assert!(out.contains("Total params: 295,434"), "{out}");
}

#[test]
fn bad_arguments_are_explained_not_panicked_on() {
    for (args, needle) in [
        (&["summary"][..], "needs a model name"),
        (&["summary", "alexnet"][..], "no model named `alexnet`"),
        (&["summary", "vit", "--batch", "zero"][..], "positive whole number"),
        (&["summary", "vit", "--batch"][..], "--batch needs a number"),
        (&["summary", "vit", "--frobnicate"][..], "unexpected argument"),
        (&["frobnicate"][..], "unknown command"),
    ] {
        let o = liandan(args);
        let (_, err) = text(&o);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {err}");
        assert!(err.contains(needle), "{args:?}: {err}");
        assert!(!err.contains("panicked"), "{args:?}: {err}");
    }
}

//! Saving and restoring an optimizer's state: tensors named `<param>.<state>` and a JSON of
//! hyper-parameters and step counts, checked entry by entry on load.

use std::collections::{BTreeMap, BTreeSet};

use liandan_tensor::Tensor;
use serde_json::{json, Value};

use super::core::{Optim, ParamState, Rule};
use super::{OptimizerState, ParamGroup};
use crate::error::{Error, Result};

/// The JSON layout: `{"optimizer", "config", "groups": [{"lr", "weight_decay", "momentum",
/// "params"}], "steps": {param: count}}` (`momentum` null where the group has the config's).
pub(crate) fn save<R: Rule>(opt: &Optim<R>) -> Result<OptimizerState> {
    let mut tensors = Vec::new();
    let mut steps = serde_json::Map::new();
    // Steps the device skipped are saved as not taken.
    let skipped = opt.skipped_updates()?;
    for (g, (group, states)) in opt.groups.iter().zip(&opt.state).enumerate() {
        let names = opt.group_rule(group).state_names();
        for (i, ((name, _), state)) in group.params.iter().zip(states).enumerate() {
            let taken_back: Vec<_> = skipped.iter().filter(|u| u.0 == g && u.1 == i).collect();
            steps.insert(name.clone(), json!(state.step - taken_back.len() as u64));
            let held = if taken_back.iter().any(|u| u.2) { &[][..] } else { &state.tensors[..] };
            // Detached: a fused update swaps the live tensor's storage, which must not reach a
            // state already saved.
            for (what, t) in names.iter().zip(held) {
                tensors.push((format!("{name}.{what}"), t.detach()));
            }
        }
    }
    let groups: Vec<Value> = opt
        .groups
        .iter()
        .map(|g| json!({"lr": g.lr, "weight_decay": g.weight_decay, "momentum": g.momentum, "params": g.params.iter().map(|(n, _)| n.as_str()).collect::<Vec<_>>()}))
        .collect();
    let config = serde_json::to_value(&opt.rule).map_err(|e| state_err(R::NAME, format!("could not write the config: {e}")))?;
    Ok(OptimizerState { tensors, hyper: json!({"optimizer": R::NAME, "config": config, "groups": groups, "steps": steps}) })
}

/// `a` or `an` before an optimizer's name, as it is said: an Adadelta, an SGD, an RMSprop.
fn article(name: &str) -> &'static str {
    let mut chars = name.chars();
    let first = chars.next().unwrap_or(' ').to_ascii_uppercase();
    // An acronym is said letter by letter: "es-gee-dee", "ar-em-es".
    let spelled = chars.next().is_some_and(|c| c.is_ascii_uppercase());
    let vowel_sound = if spelled { "AEFHILMNORSX".contains(first) } else { "AEIOU".contains(first) };
    if vowel_sound {
        "an"
    } else {
        "a"
    }
}

fn state_err(op: &'static str, detail: String) -> Error {
    Error::State { op, detail }
}

/// Restores everything or nothing: the state is checked whole before any of it replaces ours.
pub(crate) fn load<R: Rule>(opt: &mut Optim<R>, saved: &OptimizerState) -> Result<()> {
    let op = R::NAME;
    let hyper = &saved.hyper;
    let kind = hyper.get("optimizer").and_then(Value::as_str).unwrap_or("<missing>");
    if kind != R::NAME {
        return Err(state_err(op, format!("the state was saved by {} {kind} optimizer, not {}", article(kind), R::NAME)));
    }
    let rule: R = serde_json::from_value(hyper.get("config").cloned().unwrap_or(Value::Null))
        .map_err(|e| state_err(op, format!("the saved config does not read as {}'s: {e}", R::NAME)))?;
    rule.validate()?;
    let groups = hyper.get("groups").and_then(Value::as_array).ok_or_else(|| state_err(op, "the saved state has no `groups` list".into()))?;
    if groups.len() != opt.groups.len() {
        return Err(state_err(op, format!("the state has {} parameter group(s) but this optimizer has {}", groups.len(), opt.groups.len())));
    }
    let mut hypers = Vec::new();
    for (i, (saved_group, ours)) in groups.iter().zip(&opt.groups).enumerate() {
        hypers.push(check_group(op, i, saved_group, ours)?);
    }
    let steps = hyper.get("steps").and_then(Value::as_object).ok_or_else(|| state_err(op, "the saved state has no `steps` map".into()))?;
    let mut by_name: BTreeMap<&str, &Tensor> = saved.tensors.iter().map(|(n, t)| (n.as_str(), t)).collect();
    let mut problems = Vec::new();
    let mut state = Vec::new();
    for (group, &(_, _, momentum)) in opt.groups.iter().zip(&hypers) {
        let state_names = momentum.map_or_else(|| rule.clone(), |m| rule.with_momentum(m)).state_names();
        let mut group_state = Vec::new();
        for (name, param) in &group.params {
            let step = match steps.get(name.as_str()).map(Value::as_u64) {
                Some(Some(s)) => s,
                Some(None) => {
                    problems.push(format!("step count of `{name}` is not a whole number"));
                    0
                }
                None => 0,
            };
            let mut tensors = Vec::new();
            for what in &state_names {
                let key = format!("{name}.{what}");
                match by_name.remove(key.as_str()) {
                    Some(t) if t.shape() != param.shape() => {
                        problems.push(format!("`{key}` has shape {:?} but the parameter has {:?}", t.shape(), param.shape()))
                    }
                    // Moved to the parameter's device and dtype; a fresh handle, so nothing we
                    // update later writes into the caller's tensors.
                    Some(t) => tensors.push(t.to_device(param.device())?.to_dtype(param.dtype())?.contiguous()?.detach()),
                    None if step > 0 => problems.push(format!("`{key}` is missing")),
                    None => {}
                }
            }
            if step > 0 && tensors.len() != state_names.len() || step == 0 && !tensors.is_empty() {
                problems.push(format!("`{name}` has step {step} but {} of its {} state tensors", tensors.len(), state_names.len()));
            }
            group_state.push(ParamState { step, tensors });
        }
        state.push(group_state);
    }
    let unexpected: BTreeSet<&str> = by_name.keys().copied().collect();
    if !unexpected.is_empty() {
        problems.push(format!("unexpected entries (for parameters this optimizer does not have?): {}", unexpected.into_iter().collect::<Vec<_>>().join(", ")));
    }
    if !problems.is_empty() {
        return Err(state_err(op, format!("the state does not fit this optimizer: {}", problems.join("; "))));
    }
    for (g, (lr, wd, momentum)) in opt.groups.iter_mut().zip(hypers) {
        g.lr = lr;
        g.weight_decay = wd;
        g.momentum = momentum;
    }
    opt.rule = rule;
    opt.state = state;
    Ok(())
}

/// The saved group's `lr`, `weight_decay` and `momentum` (absent or null: the config's), after
/// checking it lists our parameters in order.
fn check_group(op: &'static str, i: usize, saved: &Value, ours: &ParamGroup) -> Result<(f64, f64, Option<f64>)> {
    let names: Vec<&str> = saved.get("params").and_then(Value::as_array).map(|a| a.iter().filter_map(Value::as_str).collect()).unwrap_or_default();
    let want: Vec<&str> = ours.params.iter().map(|(n, _)| n.as_str()).collect();
    if names != want {
        let missing: Vec<&str> = want.iter().filter(|n| !names.contains(n)).copied().collect();
        let extra: Vec<&str> = names.iter().filter(|n| !want.contains(n)).copied().collect();
        if missing.is_empty() && extra.is_empty() {
            return Err(state_err(op, format!("group {i} lists the same parameters in another order: saved [{}]", names.join(", "))));
        }
        return Err(state_err(
            op,
            format!(
                "group {i} was saved for other parameters ({} saved, {} here); missing: [{}]; unexpected: [{}]",
                names.len(),
                want.len(),
                missing.join(", "),
                extra.join(", ")
            ),
        ));
    }
    let num = |k: &str| saved.get(k).and_then(Value::as_f64).ok_or_else(|| state_err(op, format!("group {i} has no numeric `{k}`")));
    let momentum = match saved.get("momentum") {
        None | Some(Value::Null) => None,
        Some(_) => Some(num("momentum")?),
    };
    Ok((num("lr")?, num("weight_decay")?, momentum))
}

"""Writes optim_parity.json: what torch.optim and torch.optim.lr_scheduler do on fixed inputs,
for crates/train/tests/optim_parity.rs to compare liandan's optimizers and schedulers against.

Optimizers: two parameters in two groups (the second with half the lr and no weight decay, the
usual bias group), a fixed sequence of gradients, every option the optimizer has; the
parameters after every step. Schedulers: an SGD optimizer with two groups, every scheduler;
get_last_lr() after construction and after every step, and for OneCycleLR with
cycle_momentum each group's momentum (SGD's `momentum`, Adam's `betas[0]`) too. Some optimizer
cases also step a OneCycleLR after every step, so the cycled momentum (Adam's beta1) reaches
the parameters. Each case stores its constructor arguments under torch's names, so the Rust
side builds the same thing from this file.

Run from anywhere: python3 make_optim_parity.py (needs torch; the output is byte-identical
from run to run)."""
import json
import math
import os

import torch

STEPS = 24
SHAPES = {"w": [3, 4], "b": [5]}


def f32_list(t):
    return [float(v) for v in t.detach().reshape(-1).tolist()]


def initial_params():
    g = torch.Generator().manual_seed(8)
    return {name: torch.randn(shape, generator=g) for name, shape in SHAPES.items()}


def gradients():
    """A fixed, varied sequence: smooth drift plus sign flips, so moments and maxima move."""
    g = torch.Generator().manual_seed(88)
    out = []
    for t in range(STEPS):
        out.append({name: torch.randn(shape, generator=g) * (1.0 + 0.5 * math.sin(t)) for name, shape in SHAPES.items()})
    return out


OPTIMIZERS = [
    ("SGD", {"lr": 0.1}),
    ("SGD", {"lr": 0.1, "momentum": 0.9}),
    ("SGD", {"lr": 0.05, "momentum": 0.8, "dampening": 0.3, "weight_decay": 0.01}),
    ("SGD", {"lr": 0.1, "momentum": 0.9, "nesterov": True, "weight_decay": 5e-4}),
    ("SGD", {"lr": 0.1, "momentum": 0.5, "maximize": True}),
    ("Adam", {"lr": 0.01}),
    ("Adam", {"lr": 0.01, "betas": [0.8, 0.99], "eps": 1e-6, "weight_decay": 0.1}),
    ("Adam", {"lr": 0.01, "amsgrad": True}),
    ("Adam", {"lr": 0.01, "amsgrad": True, "weight_decay": 0.05, "maximize": True}),
    ("AdamW", {"lr": 0.01, "weight_decay": 0.01}),
    ("AdamW", {"lr": 0.02, "weight_decay": 0.1, "amsgrad": True, "betas": [0.85, 0.995]}),
    ("Adadelta", {"lr": 1.0}),
    ("Adadelta", {"lr": 0.5, "rho": 0.8, "eps": 1e-5, "weight_decay": 0.01}),
    ("RMSprop", {"lr": 0.01}),
    ("RMSprop", {"lr": 0.01, "momentum": 0.9}),
    ("RMSprop", {"lr": 0.01, "centered": True}),
    ("RMSprop", {"lr": 0.005, "alpha": 0.9, "momentum": 0.5, "centered": True, "weight_decay": 0.01, "eps": 1e-6}),
    ("Adagrad", {"lr": 0.1}),
    ("Adagrad", {"lr": 0.1, "lr_decay": 0.01, "weight_decay": 0.01, "initial_accumulator_value": 0.1, "eps": 1e-8}),
    ("Adagrad", {"lr": 0.1, "maximize": True}),
    ("Adadelta", {"lr": 1.0, "maximize": True}),
    ("RMSprop", {"lr": 0.01, "momentum": 0.9, "maximize": True}),
]

# Optimizers stepped together with OneCycleLR (default cycle_momentum=True): its momentum
# cycling reaches the update (SGD's momentum, RMSprop's momentum, Adam's beta1).
ONE_CYCLE = {"max_lr": 0.05, "total_steps": STEPS}
OPTIMIZERS_WITH_ONE_CYCLE = [
    ("SGD", {"lr": 0.1, "momentum": 0.9}),
    ("Adam", {"lr": 0.01}),
    ("AdamW", {"lr": 0.01, "weight_decay": 0.01, "amsgrad": True}),
    ("RMSprop", {"lr": 0.01, "momentum": 0.5, "centered": True}),
]


def run_optimizer(name, options, init, grads, one_cycle=None):
    params = {k: v.clone().requires_grad_(True) for k, v in init.items()}
    groups = [{"params": [params["w"]]}, {"params": [params["b"]], "lr": options["lr"] * 0.5, "weight_decay": 0.0}]
    opt = getattr(torch.optim, name)(groups, **options)
    sched = torch.optim.lr_scheduler.OneCycleLR(opt, **one_cycle) if one_cycle else None
    steps = []
    for g in grads:
        for k, p in params.items():
            p.grad = g[k].clone()
        opt.step()
        if sched is not None:
            sched.step()
        steps.append({k: f32_list(p) for k, p in params.items()})
    return steps


def optimizer_case(name, options, init, grads, one_cycle=None):
    case = {"optimizer": name, "options": options, "steps": run_optimizer(name, options, init, grads, one_cycle)}
    if one_cycle:
        case["one_cycle"] = one_cycle
    return case


def schedulers():
    """(name, torch constructor arguments, constructor); OneCycleLR's cases give
    cycle_momentum, and those that cycle it also the optimizer (SGD unless "optimizer" says)."""
    S = torch.optim.lr_scheduler
    cases = [
        ("StepLR", {"step_size": 1, "gamma": 0.7}, lambda o: S.StepLR(o, 1, 0.7)),
        ("StepLR", {"step_size": 3, "gamma": 0.5}, lambda o: S.StepLR(o, 3, 0.5)),
        ("MultiStepLR", {"milestones": [5, 10, 10, 20], "gamma": 0.3}, lambda o: S.MultiStepLR(o, [5, 10, 10, 20], 0.3)),
        ("ExponentialLR", {"gamma": 0.9}, lambda o: S.ExponentialLR(o, 0.9)),
        ("CosineAnnealingLR", {"T_max": 10, "eta_min": 0.001}, lambda o: S.CosineAnnealingLR(o, 10, 0.001)),
        ("CosineAnnealingLR", {"T_max": 7, "eta_min": 0.0}, lambda o: S.CosineAnnealingLR(o, 7)),
        ("LinearLR", {"start_factor": 0.25, "end_factor": 1.0, "total_iters": 8}, lambda o: S.LinearLR(o, 0.25, 1.0, 8)),
        ("LinearLR", {"start_factor": 1.0, "end_factor": 0.1, "total_iters": 12}, lambda o: S.LinearLR(o, 1.0, 0.1, 12)),
        ("OneCycleLR", {"max_lr": [1.0, 0.5], "total_steps": 30, "anneal_strategy": "cos", "three_phase": False, "cycle_momentum": False},
         lambda o: S.OneCycleLR(o, [1.0, 0.5], total_steps=30, cycle_momentum=False)),
        ("OneCycleLR", {"max_lr": [0.3], "total_steps": 30, "anneal_strategy": "linear", "three_phase": True, "pct_start": 0.25, "cycle_momentum": False},
         lambda o: S.OneCycleLR(o, 0.3, total_steps=30, pct_start=0.25, anneal_strategy="linear", three_phase=True, cycle_momentum=False)),
        ("OneCycleLR", {"max_lr": [1.0, 0.5], "total_steps": 30, "anneal_strategy": "cos", "three_phase": False, "cycle_momentum": True},
         lambda o: S.OneCycleLR(o, [1.0, 0.5], total_steps=30)),
        ("OneCycleLR", {"max_lr": [0.3], "total_steps": 30, "anneal_strategy": "linear", "three_phase": True, "pct_start": 0.25, "cycle_momentum": True,
                        "base_momentum": [0.8, 0.7], "max_momentum": [0.9]},
         lambda o: S.OneCycleLR(o, 0.3, total_steps=30, pct_start=0.25, anneal_strategy="linear", three_phase=True, base_momentum=[0.8, 0.7], max_momentum=0.9)),
        ("OneCycleLR", {"optimizer": "Adam", "max_lr": [0.01], "total_steps": 30, "anneal_strategy": "cos", "three_phase": False, "cycle_momentum": True},
         lambda o: S.OneCycleLR(o, 0.01, total_steps=30)),
        ("ReduceLROnPlateau", {"mode": "min", "factor": 0.5, "patience": 2, "threshold": 0.01, "threshold_mode": "rel", "cooldown": 1, "min_lr": [0.01, 0.02]},
         lambda o: S.ReduceLROnPlateau(o, "min", 0.5, 2, 0.01, "rel", 1, [0.01, 0.02])),
        ("ReduceLROnPlateau", {"mode": "max", "factor": 0.1, "patience": 0, "threshold": 0.05, "threshold_mode": "abs", "cooldown": 0, "min_lr": [0.0]},
         lambda o: S.ReduceLROnPlateau(o, "max", 0.1, 0, 0.05, "abs", 0, 0.0)),
        ("SequentialLR", {"schedulers": [["LinearLR", {"start_factor": 0.1, "end_factor": 1.0, "total_iters": 5}], ["CosineAnnealingLR", {"T_max": 20, "eta_min": 0.0}]], "milestones": [5]},
         lambda o: S.SequentialLR(o, [S.LinearLR(o, 0.1, 1.0, 5), S.CosineAnnealingLR(o, 20)], [5])),
        ("SequentialLR", {"schedulers": [["ExponentialLR", {"gamma": 0.8}], ["StepLR", {"step_size": 2, "gamma": 0.5}], ["MultiStepLR", {"milestones": [3, 6], "gamma": 0.1}]], "milestones": [6, 15]},
         lambda o: S.SequentialLR(o, [S.ExponentialLR(o, 0.8), S.StepLR(o, 2, 0.5), S.MultiStepLR(o, [3, 6], 0.1)], [6, 15])),
    ]
    return cases


def plateau_metrics():
    # Improves, stalls, improves a little (under the threshold), stalls again.
    return [1.0, 0.9, 0.85, 0.85, 0.849, 0.86, 0.84, 0.70, 0.70, 0.71, 0.72, 0.69, 0.69, 0.69, 0.5, 0.5, 0.5, 0.5,
            0.5, 0.49, 0.6, 0.6, 0.6, 0.6, 0.6, 0.2, 0.2, 0.2, 0.2, 0.2]


def momenta(opt):
    return [float(g["betas"][0]) if "betas" in g else float(g["momentum"]) for g in opt.param_groups]


def run_scheduler(make, metrics, optimizer="SGD"):
    """The lrs after construction and after every step; with momentum, also each group's."""
    p = torch.zeros(1, requires_grad=True)
    q = torch.zeros(1, requires_grad=True)
    groups = [{"params": [p]}, {"params": [q], "lr": 0.05}]
    opt = torch.optim.Adam(groups, lr=0.1) if optimizer == "Adam" else torch.optim.SGD(groups, lr=0.1, momentum=0.9)
    sched = make(opt)
    plateau = isinstance(sched, torch.optim.lr_scheduler.ReduceLROnPlateau)
    lrs = [list(sched.get_last_lr())]
    moms = [momenta(opt)]
    for step in range(30):
        opt.step()
        if plateau:
            sched.step(metrics[step])
        else:
            sched.step()
        lrs.append([float(v) for v in sched.get_last_lr()])
        moms.append(momenta(opt))
    return lrs, moms


def scheduler_case(name, args, make):
    lrs, moms = run_scheduler(make, plateau_metrics(), args.get("optimizer", "SGD"))
    case = {"scheduler": name, "args": args, "lrs": lrs}
    if args.get("cycle_momentum"):
        case["momentums"] = moms
    return case


def clipping(init, grads):
    """clip_grad_norm_ at several norms and limits (one that clips, one that does not), and
    clip_grad_value_, on the first step's gradients."""
    cases = []
    for norm_type, max_norm in [(2.0, 1.0), (2.0, 100.0), (float("inf"), 0.5), (1.5, 2.0)]:
        params = [init[k].clone().requires_grad_(True) for k in SHAPES]
        for p, k in zip(params, SHAPES):
            p.grad = grads[0][k].clone()
        total = torch.nn.utils.clip_grad_norm_(params, max_norm, norm_type)
        cases.append({"norm_type": "inf" if math.isinf(norm_type) else norm_type, "max_norm": max_norm, "total": float(total),
                      "grads": {k: f32_list(p.grad) for p, k in zip(params, SHAPES)}})
    params = [init[k].clone().requires_grad_(True) for k in SHAPES]
    for p, k in zip(params, SHAPES):
        p.grad = grads[0][k].clone()
    torch.nn.utils.clip_grad_value_(params, 0.5)
    return {"norm": cases, "value": {"clip_value": 0.5, "grads": {k: f32_list(p.grad) for p, k in zip(params, SHAPES)}}}


def main():
    init = initial_params()
    grads = gradients()
    out = {
        "about": "written by make_optim_parity.py with torch " + torch.__version__.split("+")[0],
        "initial": {k: f32_list(v) for k, v in init.items()},
        "shapes": SHAPES,
        "grads": [{k: f32_list(v) for k, v in g.items()} for g in grads],
        "optimizers": [optimizer_case(name, opts, init, grads) for name, opts in OPTIMIZERS]
        + [optimizer_case(name, opts, init, grads, ONE_CYCLE) for name, opts in OPTIMIZERS_WITH_ONE_CYCLE],
        "clipping": clipping(init, grads),
        "metrics": plateau_metrics(),
        "schedulers": [scheduler_case(name, args, make) for name, args, make in schedulers()],
    }
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "optim_parity.json")
    with open(path, "w") as f:
        json.dump(out, f, separators=(",", ":"), sort_keys=True)
        f.write("\n")


if __name__ == "__main__":
    main()

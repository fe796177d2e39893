"""Writes the PyTorch reference values that crates/nn/tests/rnn.rs checks LSTM and GRU against.

    python3 crates/nn/tests/data/make_rnn_fixtures.py

Written with torch 2.15.0 and safetensors 0.8.0, float32, on the CPU. Sizes: input 5,
hidden 7, sequence 4, batch 3.

For each case and each of `lstm` / `gru`, `rnn_<module>_<case>.safetensors` holds
- the module's state dict, prefixed: `lstm.weight_ih_l0`, `gru.bias_hh_l1_reverse`, ...
- `input`, and the initial state `h0` (and `c0` for the LSTM) where the case passes one
- the forward results `output`, `h_n` (and `c_n`)
- the loss weights `w_out`, `w_h` (and `w_c`): loss = (output * w_out).sum()
  + (h_n * w_h).sum() [+ (c_n * w_c).sum()]
- the gradients of that loss: `grad.<parameter name>` for every parameter, `grad.input`, and
  `grad.h0` / `grad.c0` where there is an initial state.

Cases (the config is also written to the file's metadata):
- batch_first: 2 layers, batch_first=True, with an initial state
- seq_first:   1 layer, sequence first, no initial state
- bidir:       2 layers, bidirectional, sequence first, with an initial state
- unbatched:   2 layers, input [L, input_size], state [num_layers, hidden], no batch dim
"""

import os

import torch
from safetensors.torch import save_file

HERE = os.path.dirname(os.path.abspath(__file__))
IN, HID, L, N = 5, 7, 4, 3

CASES = {
    # name: (num_layers, batch_first, bidirectional, batched, with_state)
    "batch_first": (2, True, False, True, True),
    "seq_first": (1, False, False, True, False),
    "bidir": (2, False, True, True, True),
    "unbatched": (2, False, False, False, True),
}


def make(kind, case, seed):
    num_layers, batch_first, bidirectional, batched, with_state = CASES[case]
    torch.manual_seed(seed)
    cls = torch.nn.LSTM if kind == "lstm" else torch.nn.GRU
    m = cls(IN, HID, num_layers=num_layers, batch_first=batch_first, bidirectional=bidirectional)
    d = 2 if bidirectional else 1
    if batched:
        x_shape = (N, L, IN) if batch_first else (L, N, IN)
        s_shape = (d * num_layers, N, HID)
    else:
        x_shape = (L, IN)
        s_shape = (d * num_layers, HID)
    x = torch.randn(x_shape, requires_grad=True)
    h0 = torch.randn(s_shape, requires_grad=True)
    c0 = torch.randn(s_shape, requires_grad=True)

    if kind == "lstm":
        out, (h_n, c_n) = m(x, (h0, c0) if with_state else None)
        states = {"h": h_n, "c": c_n}
    else:
        out, h_n = m(x, h0 if with_state else None)
        states = {"h": h_n}
    w_out = torch.randn(out.shape)
    ws = {k: torch.randn(s.shape) for k, s in states.items()}
    loss = (out * w_out).sum() + sum((s * ws[k]).sum() for k, s in states.items())
    loss.backward()

    t = {f"{kind}.{k}": v.detach().clone() for k, v in m.state_dict().items()}
    t.update({f"grad.{kind}.{k}": p.grad.clone() for k, p in m.named_parameters()})
    t["input"] = x.detach().clone()
    t["grad.input"] = x.grad.clone()
    t["output"] = out.detach().clone()
    t["w_out"] = w_out
    for k, s in states.items():
        t[f"{k}_n"] = s.detach().clone()
        t[f"w_{k}"] = ws[k]
    if with_state:
        t["h0"] = h0.detach().clone()
        t["grad.h0"] = h0.grad.clone()
        if kind == "lstm":
            t["c0"] = c0.detach().clone()
            t["grad.c0"] = c0.grad.clone()
    meta = {
        "num_layers": str(num_layers),
        "batch_first": str(batch_first),
        "bidirectional": str(bidirectional),
        "batched": str(batched),
        "with_state": str(with_state),
        "torch": torch.__version__,
    }
    t = {k: v.contiguous().float() for k, v in t.items()}
    save_file(t, os.path.join(HERE, f"rnn_{kind}_{case}.safetensors"), metadata=meta)


def main():
    for i, case in enumerate(CASES):
        for j, kind in enumerate(["lstm", "gru"]):
            make(kind, case, seed=100 + 10 * i + j)
    # The names and counts rnn.rs checks as literals (printed here so they can be re-taken).
    for kind, cls in [("lstm", torch.nn.LSTM), ("gru", torch.nn.GRU)]:
        m = cls(IN, HID, num_layers=2, bidirectional=True)
        print(kind, list(m.state_dict().keys()), sum(p.numel() for p in m.parameters()))
        m = cls(IN, HID, num_layers=2, bias=False)
        print(kind, "bias=False", list(m.state_dict().keys()), sum(p.numel() for p in m.parameters()))


if __name__ == "__main__":
    main()

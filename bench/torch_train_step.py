#!/usr/bin/env python3
"""PyTorch's training step on lrt's baseline model, beside lrt-bench's (run by hand, never in CI).

The model of docs/model.md for Injection = None (lrt-bench's `baseline` rows): RMSNorm without
weights, RoPE, QK-norm after RoPE, the S/L window pattern SSSL, value embeddings with their
per-head gates in every layer, the per-layer resid/x0 lambdas, relu^2 MLP, an untied head with
the 15 tanh soft cap, cross-entropy. One step = forward, backward and AdamW over every parameter
(torch.optim.AdamW, eps 1e-10, no weight decay) at lrt-train's batch for the preset (tiny 32 x
128, small 16 x 256, medium 32 x 256), fp32. lrt's step runs Muon on the block matrices, which
costs more than AdamW: the comparison favours PyTorch.

--precision bf16: the forward under torch.autocast("cpu", dtype=torch.bfloat16) (its matmuls on
bf16 inputs, oneDNN's bf16 kernels where the CPU has them, fp32 weights and optimizer state), the
reference for lrt-bench --precision bf16.

Usage (Debian 12: apt-get install python3-torch, PyTorch 1.13 on Debian's OpenBLAS):
  OPENBLAS_NUM_THREADS=1 /usr/bin/python3 bench/torch_train_step.py --preset small --threads 1
  build/bin/lrt-bench --presets small --variants baseline --threads 1 --no-decode
  /usr/bin/python3 bench/torch_train_step.py --preset small --threads 1 --precision bf16
  build/bin/lrt-bench --presets small --variants baseline --threads 1 --no-decode --precision bf16
Run them one after the other, twice, alternating: the machine's speed drifts. Where Debian's
OpenBLAS takes the CPU for an older one (OPENBLAS_VERBOSE=2 prints its core), give PyTorch the
right kernels with OPENBLAS_CORETYPE (SkylakeX on a CPU with AVX-512) for a fair comparison.
"""

import argparse
import math
import statistics
import sys
import time

import torch
import torch.nn.functional as F

# name: (layers, width, heads, sequence_len, vocab, rows per step)
PRESETS = {
    "tiny": (4, 128, 4, 128, 257, 32),
    "small": (6, 256, 4, 256, 257, 16),
    "medium": (8, 512, 8, 256, 257, 32),
}


def rms(x):
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1.1920929e-07)


class Baseline(torch.nn.Module):
    def __init__(self, layers, d, heads, seq, vocab):
        super().__init__()
        self.L, self.d, self.H, self.T, self.V = layers, d, heads, seq, vocab
        self.dh = d // heads
        vp = (vocab + 63) // 64 * 64
        s = math.sqrt(3.0 / d)
        P = torch.nn.Parameter

        def uni(*shape):
            return P(torch.empty(*shape).uniform_(-s, s))

        self.wte = P(torch.randn(vp, d))
        self.lm_head = P(torch.randn(vp, d) * 0.001)
        # W_o and W_2 start at zero in the release; small values here, so that no product is
        # trivially zero (the speed is the same).
        self.wq = torch.nn.ParameterList([uni(d, d) for _ in range(layers)])
        self.wk = torch.nn.ParameterList([uni(d, d) for _ in range(layers)])
        self.wv = torch.nn.ParameterList([uni(d, d) for _ in range(layers)])
        self.wo = torch.nn.ParameterList([uni(d, d) for _ in range(layers)])
        self.w1 = torch.nn.ParameterList([uni(4 * d, d) for _ in range(layers)])
        self.w2 = torch.nn.ParameterList([uni(d, 4 * d) for _ in range(layers)])
        self.ve = torch.nn.ParameterList([uni(vp, d) for _ in range(layers)])
        self.wg = torch.nn.ParameterList([uni(heads, d) for _ in range(layers)])
        self.resid_lambdas = P(torch.ones(layers))
        self.x0_lambdas = P(torch.full((layers,), 0.1))
        half = self.dh // 2
        omega = 10000.0 ** (-2.0 * torch.arange(half, dtype=torch.float32) / self.dh)
        theta = torch.arange(seq, dtype=torch.float32)[:, None] * omega[None, :]
        self.register_buffer("cos", theta.cos()[None, :, None, :])
        self.register_buffer("sin", theta.sin()[None, :, None, :])
        pos = torch.arange(seq)
        dist = pos[:, None] - pos[None, :]
        masks = []
        for l in range(layers):
            w = seq if (l == layers - 1 or "SSSL"[l % 4] == "L") else seq // 2
            allowed = (dist >= 0) & (dist <= w)
            masks.append(torch.zeros(seq, seq).masked_fill(~allowed, float("-inf")))
        self.register_buffer("masks", torch.stack(masks))

    def rope(self, x):  # x (B, T, H, dh): rotation by -theta, half-split pairs
        h = self.dh // 2
        a, b = x[..., :h], x[..., h:]
        c, s = self.cos[:, : x.shape[1]], self.sin[:, : x.shape[1]]
        return torch.cat((a * c + b * s, -a * s + b * c), dim=-1)

    def forward(self, idx, targets):
        B, T = idx.shape
        H, dh = self.H, self.dh
        x = rms(F.embedding(idx, self.wte))
        x0 = x
        for l in range(self.L):
            x = self.resid_lambdas[l] * x + self.x0_lambdas[l] * x0
            u = rms(x)
            q = (u @ self.wq[l].t()).view(B, T, H, dh)
            k = (u @ self.wk[l].t()).view(B, T, H, dh)
            v = (u @ self.wv[l].t()).view(B, T, H, dh)
            g = 2.0 * torch.sigmoid(u @ self.wg[l].t())
            v = v + g[..., None] * F.embedding(idx, self.ve[l]).view(B, T, H, dh)
            q, k = rms(self.rope(q)), rms(self.rope(k))
            q, k, v = q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2)
            att = (q @ k.transpose(-1, -2)) * (1.0 / math.sqrt(dh)) + self.masks[l, :T, :T]
            y = torch.softmax(att, dim=-1) @ v
            x = x + y.transpose(1, 2).reshape(B, T, self.d) @ self.wo[l].t()
            h = F.relu(rms(x) @ self.w1[l].t())
            x = x + h.square() @ self.w2[l].t()
        logits = rms(x) @ self.lm_head[: self.V].t()
        logits = 15.0 * torch.tanh(logits / 15.0)
        return F.cross_entropy(logits.view(-1, self.V), targets.view(-1), ignore_index=-1)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--preset", default="small", choices=sorted(PRESETS))
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--steps", type=int, default=5, help="timed steps (median reported)")
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--precision", default="fp32", choices=["fp32", "bf16"],
                    help="bf16: the forward under torch.autocast on the CPU (bf16 matmuls)")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    torch.manual_seed(1)
    L, d, H, T, V, rows = PRESETS[args.preset]
    model = Baseline(L, d, H, T, V)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3, betas=(0.8, 0.95), eps=1e-10, weight_decay=0.0)
    data = torch.randint(0, V, (rows, T + 1))
    x, y = data[:, :-1].contiguous(), data[:, 1:].contiguous()
    times = []
    for step in range(args.warmup + args.steps):
        t0 = time.perf_counter()
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=args.precision == "bf16"):
            loss = model(x, y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        if step >= args.warmup:
            times.append(time.perf_counter() - t0)
    med = statistics.median(times)
    print(
        f"torch {torch.__version__} {args.preset} baseline {args.precision}, {args.threads} thread(s), {rows}x{T}: "
        f"{rows * T / med:.0f} tokens/s, {med * 1e3:.1f} ms/step (median of {len(times)}), "
        f"loss {loss.item():.3f}, {sum(p.numel() for p in model.parameters())} parameters"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())

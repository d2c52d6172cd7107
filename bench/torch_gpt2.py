#!/usr/bin/env python3
"""The PyTorch baseline for bench_cuda: GPT-2 (124M, 1.5B) trained at seq 1024 with bf16 autocast
and fused AdamW, eager and torch.compile, measured in the same call on the same GPU.

Same model as fuyou's (learned positions, pre-LN blocks, causal attention through
scaled_dot_product_attention, tanh GELU, tied LM head), same batch and sequence. Prints
tokens/s and MFU with PaLM's FLOP count, like bench_cuda.
Usage: torch_gpt2.py [--steps N] [--batch B] [--models gpt2-124m,gpt2-1.5b] [--no-compile]"""
import argparse
import math
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

SHAPES = {"gpt2-124m": (12, 768, 12), "gpt2-1.5b": (48, 1600, 25)}
PEAK = 989.4e12


class Block(nn.Module):
    def __init__(self, C, H):
        super().__init__()
        self.H = H
        self.ln_1, self.ln_2 = nn.LayerNorm(C), nn.LayerNorm(C)
        self.c_attn, self.c_proj = nn.Linear(C, 3 * C), nn.Linear(C, C)
        self.c_fc, self.mlp_proj = nn.Linear(C, 4 * C), nn.Linear(4 * C, C)

    def forward(self, x):
        B, T, C = x.shape
        q, k, v = self.c_attn(self.ln_1(x)).split(C, dim=2)
        q, k, v = (t.view(B, T, self.H, C // self.H).transpose(1, 2) for t in (q, k, v))
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.c_proj(y.transpose(1, 2).contiguous().view(B, T, C))
        return x + self.mlp_proj(F.gelu(self.c_fc(self.ln_2(x)), approximate="tanh"))


class GPT(nn.Module):
    def __init__(self, L, C, H, V=50257, S=1024):
        super().__init__()
        self.wte, self.wpe = nn.Embedding(V, C), nn.Embedding(S, C)
        self.h = nn.ModuleList(Block(C, H) for _ in range(L))
        self.ln_f = nn.LayerNorm(C)

    def forward(self, idx, targets):
        pos = torch.arange(idx.shape[1], device=idx.device)
        x = self.wte(idx) + self.wpe(pos)
        for b in self.h:
            x = b(x)
        logits = self.ln_f(x) @ self.wte.weight.t()
        return F.cross_entropy(logits.float().view(-1, logits.shape[-1]), targets.view(-1))


def bench(name, batch, steps, compile_):
    L, C, H = SHAPES[name]
    model = GPT(L, C, H).cuda()
    params = sum(p.numel() for p in model.parameters())
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, fused=True)
    fwd = torch.compile(model) if compile_ else model
    x = torch.randint(0, 50257, (batch, 1024), device="cuda")
    y = torch.randint(0, 50257, (batch, 1024), device="cuda")
    times = []
    for s in range(steps + 3):
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = fwd(x, y)
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        torch.cuda.synchronize()
        if s >= 3:
            times.append(time.perf_counter() - t0)
    dt = sorted(times)[len(times) // 2]
    tps = batch * 1024 / dt
    mfu = tps * (6 * params + 12 * L * C * 1024) / PEAK
    print(f"torch {'compile' if compile_ else 'eager':7s} {name:10s} B {batch:2d} T 1024 "
          f"{dt:8.3f} s/step {tps:10.0f} tokens/s  MFU {100 * mfu:5.1f}%  (loss {loss.item():.3f})",
          flush=True)
    del model, opt, fwd
    torch.cuda.empty_cache()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=5)
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--models", default="gpt2-124m,gpt2-1.5b")
    ap.add_argument("--no-compile", action="store_true")
    a = ap.parse_args()
    print(f"torch {torch.__version__}, {torch.cuda.get_device_name()}", flush=True)
    for name in a.models.split(","):
        bench(name, a.batch, a.steps, False)
        if not a.no_compile:
            try:
                bench(name, a.batch, a.steps, True)
            except Exception as e:  # torch.compile needs a working toolchain there
                print(f"torch compile {name}: not available ({type(e).__name__}: "
                      f"{str(e).splitlines()[0][:120]})", flush=True)


if __name__ == "__main__":
    main()

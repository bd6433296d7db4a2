#!/usr/bin/env python3
"""The peer for bench_gpt2_step on a GPU: a GPT-2 training step written plainly in PyTorch.

GPT-2 (pre-LayerNorm blocks, GELU with the tanh approximation, tied embedding and LM head, the vocabulary
padded as llm.c pads it) trained with AdamW, in bf16 autocast (fp32 master weights, as axonn's
--dtype bf16) or fp32, attention by F.scaled_dot_product_attention (causal), AdamW fused where PyTorch
offers it (CUDA). Each mode is timed eager and, with --compile, under torch.compile, at the same shape,
so the two are compared with axonn's step on the same GPU in the same run (scripts/device-check.sh).

One line per mode, after the warm-up steps, in bench_gpt2_step's words:
    torch <mode> <model> B=<B> T=<T> <dtype>: <ms> ms/step (median of N), <tokens/s> tokens/s, MFU <x> ...
MFU uses bench_gpt2_step's FLOP count (model::Gpt::flops_per_step: 6 per weight per token, the head
included, plus the attention's two T x T products counted in full) against --peak-tflops when given.

    python3 bench/torch_gpt2_step.py --device cuda --model gpt2-124m --batch 16 --seq 1024 --compile
    python3 bench/torch_gpt2_step.py --device cpu --model gpt2-tiny --batch 2 --seq 64 --steps 2   (a check)
"""
import argparse
import math
import statistics
import sys
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

# layers, heads, channels, vocabulary, padded vocabulary (llm.c's: a multiple of 128), context
MODELS = {
    "gpt2-124m": (12, 12, 768, 50257, 50304, 1024),
    "gpt2-350m": (24, 16, 1024, 50257, 50304, 1024),
    "gpt2-tiny": (2, 4, 64, 500, 512, 64),
}


def attention(q, k, v):
    """Causal attention: PyTorch's fused kernels (flash attention on the GPU) where it has them (2.0 and
    later); written out on older versions (Debian 12's 1.13, where this script is checked on the CPU)."""
    if hasattr(F, "scaled_dot_product_attention"):
        return F.scaled_dot_product_attention(q, k, v, is_causal=True)
    T = q.shape[-2]
    s = (q @ k.transpose(-2, -1)) / math.sqrt(q.shape[-1])
    s = s.masked_fill(torch.ones(T, T, dtype=torch.bool, device=q.device).triu(1), float("-inf"))
    return F.softmax(s.float(), dim=-1).to(v.dtype) @ v


class Block(nn.Module):
    def __init__(self, C, NH):
        super().__init__()
        self.NH = NH
        self.ln1 = nn.LayerNorm(C)
        self.qkv = nn.Linear(C, 3 * C)
        self.proj = nn.Linear(C, C)
        self.ln2 = nn.LayerNorm(C)
        self.fc = nn.Linear(C, 4 * C)
        self.fc_proj = nn.Linear(4 * C, C)

    def forward(self, x):
        B, T, C = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(C, dim=2)
        q, k, v = (t.view(B, T, self.NH, C // self.NH).transpose(1, 2) for t in (q, k, v))
        y = attention(q, k, v)
        x = x + self.proj(y.transpose(1, 2).contiguous().view(B, T, C))
        return x + self.fc_proj(F.gelu(self.fc(self.ln2(x)), approximate="tanh"))


class Gpt2(nn.Module):
    def __init__(self, L, NH, C, Vp, maxT):
        super().__init__()
        self.wte = nn.Embedding(Vp, C)
        self.wpe = nn.Embedding(maxT, C)
        self.blocks = nn.ModuleList(Block(C, NH) for _ in range(L))
        self.lnf = nn.LayerNorm(C)
        for name, p in self.named_parameters():
            if p.dim() == 2:
                std = 0.02 / math.sqrt(2 * L) if name.endswith("proj.weight") else 0.02
                nn.init.normal_(p, std=std)

    def forward(self, idx, targets):
        T = idx.shape[1]
        x = self.wte(idx) + self.wpe(torch.arange(T, device=idx.device))
        for b in self.blocks:
            x = b(x)
        logits = F.linear(self.lnf(x), self.wte.weight)  # tied head
        return F.cross_entropy(logits.float().view(-1, logits.shape[-1]), targets.view(-1))


def flops_per_step(L, C, Vp, B, T):
    linear = 3 * C * C + C * C + 4 * C * C + 4 * C * C  # qkv, proj, fc, fc_proj
    fwd_per_token = 2.0 * (linear * L + C * Vp) + 2.0 * 2.0 * T * C * L
    return 3.0 * fwd_per_token * B * T


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--model", default="gpt2-124m", choices=sorted(MODELS))
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--seq", type=int, default=1024)
    ap.add_argument("--dtype", default="bf16", choices=["bf16", "fp32"])
    ap.add_argument("--steps", type=int, default=10, help="timed steps per mode")
    ap.add_argument("--warmup", type=int, default=3, help="untimed steps per mode (compilation included)")
    ap.add_argument("--compile", action="store_true", help="also time the step under torch.compile")
    ap.add_argument("--peak-tflops", type=float, default=0.0, help="for MFU (bench_gpt2_step's measured peak)")
    a = ap.parse_args()

    L, NH, C, V, Vp, maxT = MODELS[a.model]
    if a.seq > maxT:
        sys.exit(f"--seq {a.seq} is longer than {a.model}'s context of {maxT}")
    dev = torch.device(a.device)
    torch.manual_seed(0)
    if dev.type == "cuda":
        torch.backends.cuda.matmul.allow_tf32 = False  # fp32 means fp32, as axonn's CUDA_DEFAULT_MATH
        torch.backends.cudnn.allow_tf32 = False
    # a fixed batch of real-looking ids (every step sees the same; the timing does not depend on them)
    tokens = torch.randint(0, V, (a.batch, a.seq + 1), device=dev)
    idx, targets = tokens[:, :-1].contiguous(), tokens[:, 1:].contiguous()
    flops = flops_per_step(L, C, Vp, a.batch, a.seq)

    modes = ["eager"] + (["compile"] if a.compile else [])
    if a.compile and not hasattr(torch, "compile"):
        print(f"torch compile: not available in torch {torch.__version__} (needs 2.0 or later)", flush=True)
        modes = ["eager"]
    for mode in modes:
        torch.manual_seed(0)
        model = Gpt2(L, NH, C, Vp, maxT).to(dev)
        # fused=True: one kernel over all parameters (CUDA only; older PyTorch lacks the argument)
        extra = {"fused": True} if dev.type == "cuda" else {}
        opt = torch.optim.AdamW(model.parameters(), lr=1e-4, betas=(0.9, 0.95), eps=1e-8, weight_decay=0.1, **extra)
        fwd = torch.compile(model) if mode == "compile" else model

        def step():
            with torch.autocast(device_type=dev.type, dtype=torch.bfloat16, enabled=a.dtype == "bf16"):
                loss = fwd(idx, targets)
            loss.backward()
            opt.step()
            opt.zero_grad(set_to_none=True)
            return loss

        def sync():
            if dev.type == "cuda":
                torch.cuda.synchronize()

        first = last = None
        for _ in range(a.warmup):
            loss = step()
            first = first if first is not None else float(loss)
        sync()
        times = []
        for _ in range(a.steps):
            t0 = time.perf_counter()
            loss = step()
            sync()
            times.append(time.perf_counter() - t0)
        last = float(loss)
        if not math.isfinite(last):
            sys.exit(f"torch {mode}: the loss is {last}")
        sec = statistics.median(times)
        tok_s = a.batch * a.seq / sec
        mfu = f"MFU {flops / sec / (a.peak_tflops * 1e12):.3f}" if a.peak_tflops > 0 else "MFU n/a (no --peak-tflops)"
        print(f"torch {mode} {a.model} B={a.batch} T={a.seq} {a.dtype}: {sec * 1e3:.2f} ms/step (median of "
              f"{a.steps}), {tok_s:.0f} tokens/s, {flops / sec / 1e12:.2f} TFLOP/s, {mfu}; loss {first:.4f} -> "
              f"{last:.4f}; torch {torch.__version__}, {torch.cuda.get_device_name() if dev.type == 'cuda' else 'cpu'}",
              flush=True)
        del model, opt, fwd
        if dev.type == "cuda":
            torch.cuda.empty_cache()


if __name__ == "__main__":
    main()

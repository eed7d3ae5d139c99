# SPDX-License-Identifier: BSD-3-Clause
"""Does training with MXFP8 attention stay on the float32 loss curve?

    python3 -m mxfa.train_study --out DIR [--device cpu|cuda] [--models ideal,sm100]

trains a small decoder-only transformer language model on bytes of real
text, from the same seed, initialisation and batches: once with float32
attention computed by PyTorch (the baseline), once per mxfa model, with
mxfa.torch's attention in every layer; for each of two or more seeds. It
writes into DIR:

- loss.csv: model, seed, step, train_loss, eval_loss (held-out text, every
  --eval-every steps; empty elsewhere), lr;
- grads.csv: model, seed, step, layer, grad_norm, ratio (to the baseline's
  same layer at the same step of the same seed) at every evaluation;
- logits.csv: model, seed, step, layer, max_logit: the largest attention
  logit |q.k| / sqrt(D) of each layer on the training batch at every
  evaluation (attention-logit growth is the instability low precision
  tips over first: Dehghani et al. 2023, Wortsman et al. 2023);
- check.csv, with --check-at STEPS: at those steps, each layer's attention
  (O, and dQ, dK, dV from the step's own dO) against the emulator's on the
  CPU, for the first --check-seqs sequences: identical words, the largest
  ULP distance, both sides' errors against the float64 truth. On a GPU
  this checks the kernels on the tensors training hands them;
- probe.csv: at step 0, on the baseline's weights and first batch, each
  model's gradient against the baseline's, layer by layer: the norm ratio
  and the cosine (what the attention's arithmetic does to one gradient,
  before training compounds it);
- summary.csv and summary.txt: each model's final eval loss, its gap to the
  baseline's (mean over seeds) against the baseline's run-to-run spread,
  and the flags: diverged (a non-finite loss, or the eval loss above its
  first value at the end) and off-curve (the gap beyond three times the
  spread and beyond 0.01 nats); summary.csv also the seconds a run took
  and the mean time of a training step (forward, backward and optimizer;
  evaluations left out);
- loss.svg: the eval-loss curves, each seed a line.

The data: the text files of a directory (default: Debian's `fortunes`
package, /usr/share/games/fortunes; any directory or file of text with
--data), bytes as tokens, its last 5% held out. No download. The default
size takes about 3.5 minutes on 2 CPU cores; --device cuda and the size
options scale it up. Under torchrun (DDP: gloo on the CPU, NCCL on GPUs)
each process takes its share of the same global batch and rank 0 writes.
"""

import argparse
import csv
import math
import os
import sys
import time

import numpy as np
import torch
import torch.nn.functional as F

import mxfa
import mxfa.torch as mt

DEFAULT_DATA = "/usr/share/games/fortunes"
BASELINE = "float32"


# ---------------------------------------------------------------- data

def read_text(path):
    """The bytes of a file, or of a directory's text files in name order
    (fortune's .dat indexes and .u8 copies left out)."""
    if os.path.isfile(path):
        names = [path]
    elif os.path.isdir(path):
        names = [os.path.join(path, n) for n in sorted(os.listdir(path))
                 if not n.endswith((".dat", ".u8")) and os.path.isfile(os.path.join(path, n))]
    else:
        raise SystemExit("train_study: no text at %s (install Debian's fortunes package, or give --data)" % path)
    data = b"\n".join(open(n, "rb").read() for n in names)
    if len(data) < 1 << 16:
        raise SystemExit("train_study: %s holds %d bytes of text; at least 65536 are needed" % (path, len(data)))
    return np.frombuffer(data, dtype=np.uint8)


def batch_at(data, seed, step, batch, seq):
    """The global batch of a step: the same for every model and process."""
    rng = np.random.default_rng([seed, step])
    at = rng.integers(0, len(data) - seq - 1, batch)
    x = np.stack([data[a:a + seq + 1] for a in at]).astype(np.int64)
    return torch.from_numpy(x[:, :-1]), torch.from_numpy(x[:, 1:])


# ---------------------------------------------------------------- model

def attention_float32(q, k, v):
    """The baseline: causal attention in float32 by PyTorch's own products."""
    s = (q.float() @ k.float().transpose(-1, -2)) / math.sqrt(q.shape[-1])
    n = s.shape[-1]
    s = s.masked_fill(torch.ones(n, n, dtype=torch.bool, device=s.device).triu(1), float("-inf"))
    return torch.softmax(s, -1) @ v.float()


def attention_of(model):
    if model == BASELINE:
        return attention_float32
    return lambda q, k, v: mt.attention(q, k, v, is_causal=True, model=model)


class Block(torch.nn.Module):
    def __init__(self, d, heads, qk_norm=False):
        super().__init__()
        self.heads = heads
        self.ln1, self.ln2 = torch.nn.LayerNorm(d), torch.nn.LayerNorm(d)
        self.qkv, self.proj = torch.nn.Linear(d, 3 * d), torch.nn.Linear(d, d)
        self.fc, self.out = torch.nn.Linear(d, 4 * d), torch.nn.Linear(4 * d, d)
        # QK-norm (Dehghani et al. 2023): a LayerNorm on each head's queries
        # and keys, which bounds the attention logits' growth
        self.qn = torch.nn.LayerNorm(d // heads) if qk_norm else None
        self.kn = torch.nn.LayerNorm(d // heads) if qk_norm else None
        self.watch = None  # a list: the forward pass appends its largest attention logit
        self.capture = None  # a dict: the forward pass puts its attention's operands there

    def forward(self, x, attend):
        b, s, d = x.shape
        q, k, v = self.qkv(self.ln1(x)).view(b, s, 3, self.heads, d // self.heads).permute(2, 0, 3, 1, 4)
        if self.qn is not None:
            q, k = self.qn(q), self.kn(k)
        if self.watch is not None:
            with torch.no_grad():
                self.watch.append(((q.float() @ k.float().transpose(-1, -2)).abs().amax() /
                                   math.sqrt(q.shape[-1])).item())
        o = attend(q, k, v)
        if self.capture is not None:
            c = self.capture
            c.update(q=q.detach(), k=k.detach(), v=v.detach(), o=o.detach())
            for name, t in (("do", o), ("dq", q), ("dk", k), ("dv", v)):
                t.register_hook(lambda g, name=name: c.__setitem__(name, g.detach()))
        a = o.transpose(1, 2).reshape(b, s, d)
        x = x + self.proj(a)
        return x + self.out(F.gelu(self.fc(self.ln2(x))))


class GPT(torch.nn.Module):
    def __init__(self, layers, d, heads, seq, qk_norm=False):
        super().__init__()
        self.tok, self.pos = torch.nn.Embedding(256, d), torch.nn.Embedding(seq, d)
        self.blocks = torch.nn.ModuleList(Block(d, heads, qk_norm) for _ in range(layers))
        self.ln = torch.nn.LayerNorm(d)
        self.attend = attention_float32
        for name, p in self.named_parameters():  # GPT-2's initialisation
            if name.endswith("bias"):
                torch.nn.init.zeros_(p)
            elif p.dim() > 1:
                std = 0.02 / math.sqrt(2 * layers) if name.endswith(("proj.weight", "out.weight")) else 0.02
                torch.nn.init.normal_(p, 0.0, std)

    def forward(self, x, y):
        h = self.tok(x) + self.pos(torch.arange(x.shape[1], device=x.device))
        for blk in self.blocks:
            h = blk(h, self.attend)
        logits = self.ln(h) @ self.tok.weight.t()  # tied
        return F.cross_entropy(logits.reshape(-1, 256), y.reshape(-1))


def layer_norms(net):
    """The gradient's norm per layer: the embeddings, each block, the last
    norm."""
    groups = [("embed", list(net.tok.parameters()) + list(net.pos.parameters()))]
    groups += [("block%d" % i, list(b.parameters())) for i, b in enumerate(net.blocks)]
    groups += [("final_ln", list(net.ln.parameters()))]
    return [(n, torch.sqrt(sum((p.grad.double() ** 2).sum() for p in ps if p.grad is not None)).item())
            for n, ps in groups]


def grads_flat(net):
    return [torch.cat([p.grad.reshape(-1).double() for p in ps if p.grad is not None])
            for _, ps in [("embed", list(net.tok.parameters()) + list(net.pos.parameters()))] +
            [("b", list(b.parameters())) for b in net.blocks] + [("ln", list(net.ln.parameters()))]]


# ---------------------------------------------------------------- training

class Dist:
    """torchrun's environment (DDP from one process up: WORLD_SIZE set), or
    one process without torch.distributed."""

    def __init__(self, device):
        self.on = "WORLD_SIZE" in os.environ
        self.world = int(os.environ.get("WORLD_SIZE", "1"))
        self.rank = int(os.environ.get("RANK", "0"))
        local = int(os.environ.get("LOCAL_RANK", "0"))
        if device == "cuda":
            torch.cuda.set_device(local)
            self.device = torch.device("cuda", local)
        else:
            self.device = torch.device("cpu")
        self.backend = ("nccl" if device == "cuda" else "gloo") if self.on else None
        if self.on:
            torch.distributed.init_process_group(self.backend)

    def share(self, t):
        """This process's rows of the global batch."""
        n = t.shape[0] // self.world
        return t[self.rank * n:(self.rank + 1) * n]

    def mean(self, x):
        if not self.on:
            return x
        t = torch.tensor([x], dtype=torch.float64, device=self.device)
        torch.distributed.all_reduce(t)
        return t.item() / self.world

    def close(self):
        if self.on:
            torch.distributed.destroy_process_group()


def make_net(a, seed, dist):
    torch.manual_seed(seed)
    return GPT(a.layers, a.d_model, a.heads, a.seq, a.qk_norm).to(dist.device)


def lr_at(a, step):
    warm = max(1, a.steps // 10)
    if step < warm:
        return a.lr * (step + 1) / warm
    return a.lr * 0.5 * (1 + math.cos(math.pi * (step - warm) / max(1, a.steps - warm)))


def evaluate(net, a, data, dist):
    net.eval()
    with torch.no_grad():
        losses = []
        for i in range(a.eval_batches):
            x, y = batch_at(data, 10 ** 6 + i, 0, a.batch, a.seq)
            losses.append(net(dist.share(x).to(dist.device), dist.share(y).to(dist.device)).item())
    net.train()
    return dist.mean(float(np.mean(losses)))


def train(a, model, seed, train_data, eval_data, dist, log):
    net = make_net(a, seed, dist)
    net.attend = attention_of(model)
    ddp = torch.nn.parallel.DistributedDataParallel(net) if dist.on else net
    opt = torch.optim.AdamW(net.parameters(), lr=a.lr, weight_decay=0.1, betas=(0.9, 0.95))
    rows, grows, lrows, crows = [], [], [], []
    t0, stepping = time.time(), 0.0
    for step in range(a.steps + 1):
        evaluating = step % a.eval_every == 0 or step == a.steps
        ev = evaluate(net, a, eval_data, dist) if evaluating else None
        if step == a.steps:
            rows.append((model, seed, step, "", ev, ""))
            break
        for g in opt.param_groups:
            g["lr"] = lr_at(a, step)
        x, y = batch_at(train_data, seed, step, a.batch, a.seq)
        x, y = dist.share(x).to(dist.device), dist.share(y).to(dist.device)
        checking = model != BASELINE and step in a.check_at
        for blk in net.blocks:
            blk.watch = [] if evaluating else None
            blk.capture = {} if checking else None
        ts = time.time()
        loss = ddp(x, y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        if evaluating:
            grows += [(model, seed, step, n, v) for n, v in layer_norms(net)]
            lrows += [(model, seed, step, "block%d" % i, max(blk.watch)) for i, blk in enumerate(net.blocks)]
        torch.nn.utils.clip_grad_norm_(net.parameters(), 1.0)
        opt.step()
        tl = dist.mean(loss.item())  # .item() waits for the step's kernels
        stepping += time.time() - ts
        if checking:
            for i, blk in enumerate(net.blocks):
                crows += check(a, model, seed, step, i, blk.capture, log)
                blk.capture = None
        rows.append((model, seed, step, tl, ev, lr_at(a, step)))
        if evaluating:
            log("  %-10s seed %d step %5d  train %.4f  eval %.4f  max logit %.1f  (%.1f s)" %
                (model, seed, step, tl, ev, max(v for *_, v in lrows[-len(net.blocks):]), time.time() - t0))
        if not math.isfinite(tl):
            log("  %-10s seed %d: the loss is %s at step %d; stopped" % (model, seed, tl, step))
            break
    return rows, grows, lrows, crows, (time.time() - t0, stepping / max(1, a.steps))


def check(a, model, seed, step, layer, c, log):
    """One layer's attention of one training step against the emulator (the
    cpu backend), on the first --check-seqs sequences of this process's
    batch: O, and dQ, dK, dV from the step's own dO. Rows for check.csv."""
    n = min(a.check_seqs, c["q"].shape[0])
    s = c["q"].shape[2]

    def tokens(x):  # [B, H, S, D] -> [n S, H, D], float32 on the host
        x = x[:n].float().cpu()
        return x.transpose(1, 2).reshape(n * s, x.shape[1], x.shape[3]).contiguous().numpy()

    cu = np.arange(n + 1) * s
    q, k, v, o = (tokens(c[x]) for x in ("q", "k", "v", "o"))
    opts = dict(model=model, causal="leak-free", backend="cpu")
    f = mxfa.compare_attention(q, k, v, o, None, cu, cu, **opts)
    b = mxfa.compare_attention(q, k, v, None, None, cu, cu, dout=tokens(c["do"]), dq=tokens(c["dq"]),
                               dk=tokens(c["dk"]), dv=tokens(c["dv"]), **opts)
    size = {"O": c["o"], "dQ": c["q"], "dK": c["k"], "dV": c["v"]}
    out = []
    for name, r in list(f["outputs"].items()) + list(b["outputs"].items()):
        out.append((model, seed, step, "block%d" % layer, name, r["identical"], size[name][:n].numel(), r["max_ulp"],
                    r["rel_l2_candidate"], r["rel_l2_emulator"]))
    bad = [r for r in out if r[5] != r[6]]
    log("  %-10s seed %d step %5d block%d: O, dQ, dK, dV against the emulator: %s" %
        (model, seed, step, layer, "identical" if not bad else "%d outputs differ" % len(bad)))
    return out


def probe(a, models, seed, train_data, dist):
    """Each model's gradient on the baseline's initial weights and first batch,
    against the baseline's: per layer, the norm ratio and the cosine."""
    x, y = batch_at(train_data, seed, 0, a.batch, a.seq)
    x, y = dist.share(x).to(dist.device), dist.share(y).to(dist.device)
    out, ref = [], None
    for model in [BASELINE] + models:
        net = make_net(a, seed, dist)
        net.attend = attention_of(model)
        net(x, y).backward()
        g = grads_flat(net)
        names = [n for n, _ in layer_norms(net)]
        if ref is None:
            ref = g
            continue
        for n, gm, gr in zip(names, g, ref):
            out.append((model, seed, n, (gm.norm() / gr.norm()).item(),
                        (gm @ gr / (gm.norm() * gr.norm())).item()))
    return out


# ---------------------------------------------------------------- reports

def svg_plot(path, curves, title):
    """Eval loss against step, one polyline per (model, seed)."""
    w, h, m = 720, 440, 60
    pts = [(s, l) for c in curves.values() for s, l in c]
    if not pts:
        return
    x0, x1 = 0, max(s for s, _ in pts) or 1
    y0, y1 = min(l for _, l in pts), max(l for _, l in pts)
    y1 = y0 + 1e-9 if y1 <= y0 else y1
    colors = ["#000000", "#d62728", "#1f77b4", "#2ca02c", "#9467bd", "#ff7f0e"]
    models = sorted({m_ for m_, _ in curves}, key=lambda n: (n != BASELINE, n))
    out = ['<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" font-family="sans-serif" '
           'font-size="12">' % (w, h), '<rect width="100%" height="100%" fill="white"/>',
           '<text x="%d" y="20" font-size="13">%s</text>' % (m, title)]
    sx = lambda s: m + (w - 2 * m) * (s - x0) / (x1 - x0)
    sy = lambda l: h - m - (h - 2 * m) * (l - y0) / (y1 - y0)
    out.append('<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="black"/>' % (m, h - m, w - m, h - m))
    out.append('<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="black"/>' % (m, m, m, h - m))
    for i in range(5):
        l = y0 + (y1 - y0) * i / 4
        out.append('<text x="%d" y="%.1f" text-anchor="end">%.3f</text>' % (m - 4, sy(l) + 4, l))
        s = x0 + (x1 - x0) * i / 4
        out.append('<text x="%.1f" y="%d" text-anchor="middle">%d</text>' % (sx(s), h - m + 16, s))
    out.append('<text x="%d" y="%d" text-anchor="middle">step</text>' % (w // 2, h - 20))
    out.append('<text x="14" y="%d" transform="rotate(-90 14 %d)" text-anchor="middle">eval loss (nats a byte)'
               '</text>' % (h // 2, h // 2))
    for (model, seed), c in sorted(curves.items()):
        col = colors[models.index(model) % len(colors)]
        out.append('<polyline fill="none" stroke="%s" stroke-width="1.5" points="%s"/>' %
                   (col, " ".join("%.1f,%.1f" % (sx(s), sy(l)) for s, l in c)))
    for i, model in enumerate(models):
        out.append('<text x="%d" y="%d" fill="%s">%s</text>' % (w - m - 150, m + 16 * i, colors[i % len(colors)],
                                                                model))
    out.append("</svg>")
    with open(path, "w") as f:
        f.write("\n".join(out) + "\n")


def summarize(a, rows, models, seeds):
    final, first, bad = {}, {}, set()
    for model, seed, step, tl, ev, _ in rows:
        if ev != "" and ev is not None:
            final[model, seed] = ev
            first.setdefault((model, seed), ev)
        if tl != "" and not math.isfinite(tl):
            bad.add((model, seed))
    base = [final[BASELINE, s] for s in seeds if (BASELINE, s) in final]
    spread = float(np.std(base, ddof=1)) if len(base) > 1 else float("nan")
    out = []
    for model in [BASELINE] + models:
        gaps = [final[model, s] - final[BASELINE, s] for s in seeds if (model, s) in final and (BASELINE, s) in final]
        losses = [final[model, s] for s in seeds if (model, s) in final]
        diverged = any((model, s) in bad or (model, s) in final and final[model, s] > first[model, s]
                       for s in seeds)
        gap = float(np.mean(gaps)) if gaps else float("nan")
        own = float(np.std(losses, ddof=1)) if len(losses) > 1 else float("nan")
        off = model != BASELINE and abs(gap) > max(0.01, 3 * spread)
        out.append(dict(model=model, final_eval_loss=float(np.mean(losses)) if losses else float("nan"),
                        seed_spread=own, gap_to_baseline=gap, baseline_spread=spread, diverged=int(diverged),
                        off_curve=int(off)))
    return out


def title(a, seeds):
    return "eval loss, %d seeds: %s and mxfa attention; %d layers, d_model %d, seq %d, lr %g%s" % (
        seeds, BASELINE, a.layers, a.d_model, a.seq, a.lr, ", QK-norm" if a.qk_norm else "")


def write_csv(path, header, rows):
    with open(path, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(header)
        for r in rows:
            w.writerow(["%.6g" % v if isinstance(v, float) else v for v in r])


def main(argv=None):
    p = argparse.ArgumentParser(prog="python3 -m mxfa.train_study", description=__doc__.split("\n\n")[0])
    p.add_argument("--out", required=True, help="the directory to write (made if missing)")
    p.add_argument("--device", choices=("cpu", "cuda"), default="cpu")
    p.add_argument("--models", help="mxfa models, comma-separated (default: ideal,sm100 on the CPU; with "
                   "--device cuda those the GPU's kernels compute: sm90-bf16,sm90-fp8 on Hopper, sm100 on "
                   "Blackwell)")
    p.add_argument("--seeds", default="1,2", help="seeds, comma-separated, at least two (default 1,2)")
    p.add_argument("--data", default=DEFAULT_DATA, help="a text file or a directory of them (default %s)" %
                   DEFAULT_DATA)
    p.add_argument("--layers", type=int, default=2)
    p.add_argument("--d-model", type=int, default=128)
    p.add_argument("--heads", type=int, default=2, help="head dim d_model / heads must be 64, 128 or 256")
    p.add_argument("--seq", type=int, default=128)
    p.add_argument("--batch", type=int, default=4, help="the global batch, in sequences")
    p.add_argument("--qk-norm", action="store_true", help="a LayerNorm on each head's queries and keys (every "
                   "model, the baseline too)")
    p.add_argument("--check-at", default="", help="steps, comma-separated, at which each layer's attention (O "
                   "and its gradients) is checked against the emulator on the CPU: check.csv")
    p.add_argument("--check-seqs", type=int, default=2, help="the sequences of the batch that --check-at checks "
                   "(default 2)")
    p.add_argument("--steps", type=int, default=60)
    p.add_argument("--lr", type=float, default=3e-3)
    p.add_argument("--eval-every", type=int, default=20)
    p.add_argument("--eval-batches", type=int, default=2)
    a = p.parse_args(argv)
    if a.d_model % a.heads or a.d_model // a.heads not in (64, 128, 256):
        p.error("--d-model / --heads must be 64, 128 or 256 (mxfa's head dims), got %d / %d" % (a.d_model, a.heads))
    seeds = [int(s) for s in a.seeds.split(",") if s]
    try:
        a.check_at = {int(s) for s in a.check_at.split(",") if s}
    except ValueError:
        p.error("--check-at: steps, comma-separated, got %r" % a.check_at)
    if len(seeds) < 2:
        p.error("--seeds: at least two, for the run-to-run spread")
    if min(a.steps, a.eval_every, a.eval_batches, a.layers, a.seq, a.batch) < 1:
        p.error("--steps, --eval-every, --eval-batches, --layers, --seq and --batch must be positive")
    if a.device == "cuda" and not torch.cuda.is_available():
        p.error("--device cuda: PyTorch sees no CUDA device")
    data = read_text(a.data)  # before the process group: a missing text ends every process alike
    dist = Dist(a.device)
    if a.batch % dist.world:
        p.error("--batch %d does not split over %d processes" % (a.batch, dist.world))
    if a.models:
        models = [m for m in a.models.split(",") if m]
    else:
        models = ["ideal", "sm100"]
        if a.device == "cuda":
            arch, _ = mxfa.Context("cuda").device()
            models = ["sm100"] if arch >= 100 else ["sm90-bf16", "sm90-fp8"] if arch >= 90 else models
    for m in models:
        if m not in mxfa._capi.MODELS:
            p.error("--models: unknown model %r (ideal, sm100, sm90-fp8, sm90-bf16)" % m)
    cut = len(data) * 95 // 100
    train_data, eval_data = data[:cut], data[cut:]
    lead = dist.rank == 0
    log = (lambda s: print(s, flush=True)) if lead else (lambda s: None)
    log("train_study: %d bytes of text from %s; GPT %d layers, d_model %d, %d heads, seq %d, global batch %d, "
        "%d steps%s, %d process(es)%s on %s; models %s against %s attention; seeds %s" %
        (len(data), a.data, a.layers, a.d_model, a.heads, a.seq, a.batch, a.steps, ", QK-norm" if a.qk_norm else "",
         dist.world,
         " (DDP, %s)" % dist.backend if dist.on else "", a.device,
         ",".join(models), BASELINE, a.seeds))
    rows, grows, lrows, crows, probes, times = [], [], [], [], [], {}
    for seed in seeds:
        probes += probe(a, models, seed, train_data, dist)
        for model in [BASELINE] + models:
            r, g, l, c, t = train(a, model, seed, train_data, eval_data, dist, log)
            rows += r
            grows += g
            lrows += l
            crows += c
            times[model, seed] = t
    dist.close()
    if not lead:
        return 0
    os.makedirs(a.out, exist_ok=True)
    base = {(s, st, n): v for m, s, st, n, v in grows if m == BASELINE}
    write_csv(os.path.join(a.out, "loss.csv"), ["model", "seed", "step", "train_loss", "eval_loss", "lr"], rows)
    write_csv(os.path.join(a.out, "grads.csv"), ["model", "seed", "step", "layer", "grad_norm", "ratio"],
              [(m, s, st, n, v, v / base[s, st, n] if base.get((s, st, n)) else "") for m, s, st, n, v in grows])
    write_csv(os.path.join(a.out, "logits.csv"), ["model", "seed", "step", "layer", "max_logit"], lrows)
    if a.check_at:
        write_csv(os.path.join(a.out, "check.csv"), ["model", "seed", "step", "layer", "output", "identical", "words",
                                                     "max_ulp", "rel_l2_kernel", "rel_l2_emulator"], crows)
    write_csv(os.path.join(a.out, "probe.csv"), ["model", "seed", "layer", "norm_ratio", "cosine"], probes)
    summary = summarize(a, rows, models, seeds)
    keys = ["model", "final_eval_loss", "seed_spread", "gap_to_baseline", "baseline_spread", "diverged", "off_curve"]
    write_csv(os.path.join(a.out, "summary.csv"), keys + ["seconds", "ms_per_step"],
              [[s[k] for k in keys] + [float(np.mean([times[s["model"], x][i] for x in seeds])) * f
                                       for i, f in ((0, 1), (1, 1000))] for s in summary])
    curves = {}
    for model, seed, step, _, ev, _ in rows:
        if ev != "" and ev is not None:
            curves.setdefault((model, seed), []).append((step, ev))
    svg_plot(os.path.join(a.out, "loss.svg"), curves, title(a, len(seeds)))
    lines = ["%-10s final eval loss %.4f (seeds' spread %.4f), gap to %s %+.4f (its spread %.4f), %.1f ms a "
             "step%s%s" %
             (s["model"], s["final_eval_loss"], s["seed_spread"], BASELINE, s["gap_to_baseline"],
              s["baseline_spread"], 1000 * float(np.mean([times[s["model"], x][1] for x in seeds])),
              "  DIVERGED" if s["diverged"] else "", "  OFF THE CURVE" if s["off_curve"] else "")
             for s in summary]
    worst = {}
    for m, s, n, ratio, cos in probes:
        worst[m] = min(worst.get(m, 1.0), cos)
    top = {}
    for m, _, _, _, v in lrows:
        top[m] = max(top.get(m, 0.0), v)
    lines += ["%-10s largest attention logit (|q.k| times the softmax scale) at an evaluation: %.1f" % (m, v)
              for m, v in top.items()]
    if crows:
        same = sum(r[5] for r in crows)
        words = sum(r[6] for r in crows)
        lines.append("attention against the emulator at steps %s: %d of %d words identical (check.csv)" %
                     (",".join(map(str, sorted(a.check_at))), same, words))
    lines += ["%-10s step-0 gradient against %s's: lowest cosine over layers %.6f" % (m, BASELINE, c)
              for m, c in worst.items()]
    with open(os.path.join(a.out, "summary.txt"), "w") as f:
        f.write("\n".join(lines) + "\n")
    print("\n".join(lines))
    print("train_study: wrote loss.csv, grads.csv, logits.csv,%s probe.csv, summary.csv, summary.txt and loss.svg in %s"
          % (" check.csv," if a.check_at else "", a.out))
    differ = any(r[5] != r[6] for r in crows)
    return 1 if differ or any(s["diverged"] for s in summary) else 0


if __name__ == "__main__":
    sys.exit(main())

#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# python3 -m mxfa.train_study at its smallest, on the CPU: one process, its
# attention at step 3 checked against the emulator (--check-at); one
# under torch.distributed (DDP over gloo, a world of one), whose curves must
# be the first's bytes; two with the same global batch, whose loss curve
# must stay within the run-to-run spread of the first (the seeds'
# difference); the files it writes and what they must say. SKIP without
# numpy and PyTorch, or without text to train on (Debian: fortunes).
need_modules="torch torch.distributed"
need_hint="Debian: apt-get install python3-torch"
. "${MXFA_SRCDIR:-..}/tests/python-env.sh"
data=${MXFA_TRAIN_DATA:-/usr/share/games/fortunes}
if [ ! -e "$data" ]; then
    echo "1..0 # SKIP no text at $data (Debian: apt-get install fortunes)"
    exit 0
fi
tmp=$(mktemp -d "${TMPDIR:-/tmp}/t-train-study.XXXXXX") || exit 1
trap 'rm -rf "$tmp"' EXIT
small="--data $data --models sm100 --seeds 1,2 --layers 1 --d-model 64 --heads 1 --seq 64 --batch 4 --steps 6
    --eval-every 3 --eval-batches 2"
OMP_NUM_THREADS=1 "$py" -m mxfa.train_study --out "$tmp/one" $small --check-at 3 > "$tmp/one.log" 2>&1
one=$?
port=$("$py" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
# Under torch.distributed, through its env:// rendezvous with the variables
# torchrun sets (torchrun itself fails at start under Debian's PyTorch 1.13
# with Python 3.11, in its own argument handling). One process: DDP over
# gloo with a world of one, which must change no byte of the curves.
OMP_NUM_THREADS=1 RANK=0 LOCAL_RANK=0 WORLD_SIZE=1 LOCAL_WORLD_SIZE=1 MASTER_ADDR=127.0.0.1 MASTER_PORT=$port \
    "$py" -m mxfa.train_study --out "$tmp/ddp1" $small > "$tmp/ddp1.log" 2>&1
ddp1=$?
# Two processes with the same global batch.
for r in 0 1; do
    OMP_NUM_THREADS=1 RANK=$r LOCAL_RANK=$r WORLD_SIZE=2 LOCAL_WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=$port \
        "$py" -m mxfa.train_study --out "$tmp/two" $small > "$tmp/two.$r.log" 2>&1 &
    eval "pid$r=\$!"
done
wait "$pid0"
two=$?
wait "$pid1" || two=$?
cat "$tmp/two.0.log" "$tmp/two.1.log" > "$tmp/two.log"
"$py" - "$tmp" "$one" "$two" "$src" "$ddp1" <<'PY'
import csv, os, sys
tmp, one, two, src, ddp1 = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4], int(sys.argv[5])
n = 0
def ok(c, what):
    global n
    n += 1
    print("%s %d - %s" % ("ok" if c else "not ok", n, what))
def log(name):
    return open(os.path.join(tmp, name + ".log")).read()
ok(one == 0, "one process: exit 0 (%d)%s" % (one, "" if one == 0 else ": " + log("one")[-800:]))
ok(two == 0, "two processes under torch.distributed, gloo: exit 0 (%d)%s" % (two, "" if two == 0 else ": " + log("two")[-800:]))
ok(ddp1 == 0, "one process under torch.distributed (DDP, gloo): exit 0 (%d)%s" %
   (ddp1, "" if ddp1 == 0 else ": " + log("ddp1")[-800:]))
def text(run, name):
    p = os.path.join(tmp, run, name)
    return open(p, "rb").read() if os.path.isfile(p) else None
ok(text("one", "loss.csv") is not None and text("one", "loss.csv") == text("ddp1", "loss.csv") and
   text("one", "grads.csv") == text("ddp1", "grads.csv"),
   "DDP with one process: loss.csv and grads.csv are the plain run's bytes")
files = ("loss.csv", "grads.csv", "logits.csv", "probe.csv", "summary.csv", "summary.txt", "loss.svg")
for run in ("one", "two"):
    have = [f for f in files if os.path.isfile(os.path.join(tmp, run, f)) and os.path.getsize(os.path.join(tmp, run, f))]
    ok(len(have) == len(files), "%s: writes %s (has %s)" % (run, ", ".join(files), ", ".join(have)))
def rows(run, name):
    try:
        return list(csv.DictReader(open(os.path.join(tmp, run, name))))
    except OSError:
        return []
def curve(run, model, seed):
    return [float(r["eval_loss"]) for r in rows(run, "loss.csv")
            if r["model"] == model and r["seed"] == seed and r["eval_loss"] != ""]
c = {(m, s): curve("one", m, s) for m in ("float32", "sm100") for s in ("1", "2")}
ok(all(len(v) == 3 for v in c.values()), "one: three evaluations a run (steps 0, 3, 6)")
ok(all(v[-1] < v[0] for v in c.values() if v), "one: every run's eval loss falls")
# the run-to-run spread: how far the two seeds' curves are apart
spread = max(abs(a - b) for a, b in zip(c["float32", "1"], c["float32", "2"])) if c["float32", "1"] else 0
for m in ("float32", "sm100"):
    d = curve("two", m, "1")
    gap = max((abs(a - b) for a, b in zip(d, c[m, "1"])), default=float("inf")) if len(d) == 3 else float("inf")
    ok(gap <= spread and spread > 0, "%s: the two processes\' curve is within the seeds' spread of one process's "
       "(largest difference %.2e, spread %.2e)" % (m, gap, spread))
s = {r["model"]: r for r in rows("one", "summary.csv")}
ok(set(s) == {"float32", "sm100"} and s["sm100"]["diverged"] == "0" and s["sm100"]["off_curve"] == "0",
   "summary: sm100 neither diverged nor off the curve")
ok(abs(float(s.get("float32", {}).get("gap_to_baseline", "nan"))) == 0.0, "summary: the baseline's gap to itself is 0")
p = rows("one", "probe.csv")
ok(len(p) == 2 * 3 and all(0.99 < float(r["cosine"]) <= 1.0 + 1e-9 and 0.9 < float(r["norm_ratio"]) < 1.1 for r in p),
   "probe: sm100's step-0 gradient is within 1%% of float32's in direction, layer by layer (%d rows)" % len(p))
k = rows("one", "check.csv")
ok(len(k) == 2 * 4 and {r["output"] for r in k} == {"O", "dQ", "dK", "dV"} and
   all(r["step"] == "3" and r["model"] == "sm100" and int(r["identical"]) == int(r["words"]) == 2 * 64 * 64
       and r["max_ulp"] == "0" and 0 < float(r["rel_l2_kernel"]) < 0.2 for r in k),
   "check.csv (--check-at 3): O, dQ, dK, dV of both seeds' step 3, captured from training, are the emulator's "
   "(%d rows)" % len(k))
g = rows("one", "grads.csv")
ok(g and all(r["ratio"] != "" for r in g) and
   all(float(r["ratio"]) == 1.0 for r in g if r["model"] == "float32"), "grads: every layer's ratio, 1 for the baseline")
svg = open(os.path.join(tmp, "one", "loss.svg")).read() if os.path.isfile(os.path.join(tmp, "one", "loss.svg")) else ""
ok(svg.startswith("<svg") and svg.count("<polyline") == 4, "loss.svg: a curve per model and seed")
print("1..%d" % n)
PY

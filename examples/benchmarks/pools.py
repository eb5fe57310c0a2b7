"""Which threads should run graphgrad's split kernels? graphgrad's own worker pool against an
OpenMP team (``GRAPHGRAD_POOL=openmp``: torch's libgomp when torch is loaded, else the system's),
on the mlp-b128 training step, in three neighbourhoods:

- alone: steps back to back in an otherwise idle process;
- beside numpy / torch: each step right after a 512x512 matmul by numpy (OpenBLAS's threads then
  spin) or torch (its OpenMP threads spin), in the same process;
- under load: the same, while two other processes keep both cores busy.

For scale, torch eager's own MLP step (its OpenMP pool) runs in the same neighbourhoods: how much
a spinning foreign pool costs a library that does nothing about it. Every case runs in its own
process (the pool is chosen once per process). Speed is only printed, never asserted::

    env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE python examples/benchmarks/pools.py
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from run import cpu_model  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]

CASE = """
import json, sys, time
sys.path[:0] = [{root!r}, {here!r}]
neighbour, library = {neighbour!r}, {library!r}
if neighbour == "torch" or library == "torch":
    import torch
import numpy as np
import workloads
if library == "torch":
    libs = workloads.open_libraries("torch", use_torch_compile=False)
    step, _ = workloads.torch_mlp_step(libs, 128, compiled=False)
else:
    workloads.import_graphgrad()
    sess, train_op, feed, _ = workloads.build_graphgrad_mlp(128)
    step = lambda: sess.run(train_op, feed)
rng = np.random.default_rng(4)
a, b = (rng.standard_normal((512, 512)).astype(np.float32) for _ in range(2))
if neighbour == "torch":
    at, bt, ct = torch.from_numpy(a), torch.from_numpy(b), torch.empty(512, 512)
    wake = lambda: torch.matmul(at, bt, out=ct)
elif neighbour == "numpy":
    product = np.empty_like(a)
    wake = lambda: np.matmul(a, b, out=product)
else:
    wake = lambda: None
for _ in range(20):
    step()
samples = []
for _ in range({rounds}):
    total = 0.0
    for _ in range({steps}):
        wake()
        start = time.perf_counter()
        step()
        total += time.perf_counter() - start
    samples.append(total / {steps})
if library == "torch":
    kind = "torch"
else:
    from runtime import jit
    kind = jit._pool[0].kind
print(json.dumps(dict(pool=kind, median=sorted(samples)[len(samples) // 2])))
"""

HOG = "import time\nend = time.time() + {seconds}\nwhile time.time() < end:\n    pass\n"


def run_case(pool: str, neighbour: str, loaded: bool, rounds: int, steps: int) -> dict:
    """One process: graphgrad's step on ``pool`` ("own" or "openmp"), or torch eager's step
    (``pool="torch"``), in a neighbourhood."""
    env = dict(os.environ, GRAPHGRAD_POOL="own" if pool == "torch" else pool)
    code = CASE.format(root=str(ROOT), here=str(Path(__file__).parent), neighbour=neighbour, rounds=rounds,
                       steps=steps, library="torch" if pool == "torch" else "graphgrad")
    hogs = [subprocess.Popen([sys.executable, "-c", HOG.format(seconds=600)]) for _ in range(2 if loaded else 0)]
    try:
        time.sleep(0.5 if hogs else 0)
        result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=600)
    finally:
        for hog in hogs:
            hog.kill()
            hog.wait()
    if result.returncode != 0:
        raise RuntimeError(f"{pool} / {neighbour}: {result.stderr.strip().splitlines()[-1:]}")
    return json.loads(result.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--steps", type=int, default=50)
    parser.add_argument("--json", type=Path, help="also write the figures here")
    parser.add_argument("--no-load", action="store_true", help="skip the rows under load (a quicker run)")
    args = parser.parse_args()
    print(f"mlp-b128 step, median of {args.rounds} rounds of {args.steps} steps; {cpu_model()}, "
          f"{os.cpu_count()} logical CPUs")
    figures: dict[str, dict[str, float]] = {}
    rows = [(neighbour, loaded) for loaded in ((False,) if args.no_load else (False, True))
            for neighbour in ("alone", "numpy", "torch")]
    print(f"{'neighbourhood':<28}{'own pool':>12}{'openmp':>12}{'torch eager':>14}")
    for neighbour, loaded in rows:
        label = ("beside " + neighbour if neighbour != "alone" else "alone") + (", under load" if loaded else "")
        cells = {pool: run_case(pool, neighbour, loaded, args.rounds, args.steps)["median"] * 1e3
                 for pool in ("own", "openmp", "torch")}
        figures[label] = cells
        print(f"{label:<28}{cells['own']:>9.2f} ms{cells['openmp']:>9.2f} ms{cells['torch']:>11.2f} ms", flush=True)
    if args.json:
        args.json.write_text(json.dumps(dict(cpu=cpu_model(), figures_ms=figures), indent=2))


if __name__ == "__main__":
    main()

"""Do the hints' advice gain what the hints estimate? Measured, in one run.

For each hint whose advice is a setting (a workers' count, a threads' count), a small CPU
job runs under ``perftop run``; ``perftop report --json`` of its recording gives the hint,
its ``est_gain`` and its advice; the setting the advice names is read from the advice and
applied; the job runs again under perftop. The job times its own steps (wall clock, after
a warm-up); the measured gain is the share of step time the advice saved:
``1 - after / before``. The estimate misses when it is off by more than 30% of the
measured gain. Loading is done with sleeps (storage-like waits) and compute with sleeps
and a small model, so the figures hold on a busy 2-core box.

    python benchmarks/hint_gains.py [--runs 1]

Hints whose advice is no setting, or needs a GPU, say what their estimate rests on.
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent

JOB = """
import json, sys, time
import torch
from torch.utils.data import DataLoader, Dataset
case, steps, workers, threads, load_s, compute_s, spin_s = sys.argv[1:8]
steps, workers, threads = int(steps), int(workers), int(threads)
load_s, compute_s, spin_s = float(load_s), float(compute_s), float(spin_s)
torch.manual_seed(0)
if threads:
    torch.set_num_threads(threads)

class Data(Dataset):
    def __len__(self):
        return steps * 4
    def __getitem__(self, i):
        time.sleep(load_s)
        end = time.process_time() + spin_s
        while time.process_time() < end:
            pass
        return torch.randn(8), torch.randn(1)

model = torch.nn.Linear(8, 1)
big = torch.nn.Linear(512, 512)
opt = torch.optim.SGD(model.parameters(), lr=0.01)
loader = DataLoader(Data(), batch_size=4, num_workers=workers)
marks = []
for i, (x, y) in enumerate(loader):
    loss = ((model(x) - y) ** 2).mean()
    opt.zero_grad(); loss.backward(); opt.step()
    if case == "cpu":
        t = time.perf_counter()
        while time.perf_counter() - t < compute_s:
            big(torch.randn(64, 512))
    else:
        time.sleep(compute_s)
    marks.append(time.perf_counter())
warm = max(1, len(marks) // 10)
print("BENCH " + json.dumps({"step_s": (marks[-1] - marks[warm]) / (len(marks) - 1 - warm)}))
"""

# name, hint id, job case, steps, before settings (workers, threads), load_s per sample,
# compute_s per step, spin_s per sample (CPU work in the dataset)
CASES: list[tuple[str, str, str, int, tuple[int, int], float, float, float]] = [
    ("num_workers=0, batches loaded in the loop", "input-bound", "io", 300, (0, 0),
     0.002, 0.002, 0.0),
    ("2 workers waiting on storage", "input-bound", "io", 400, (2, 0), 0.004, 0.002, 0.0),
    ("4 torch threads beside 2 busy workers", "cpu-oversubscribed", "cpu", 150, (2, 4),
     0.0, 0.02, 0.01),
]  # fmt: skip

RESTS_ON = {
    "host-device-sync": "rewriting a line (no setting): on a GPU, the host time measured "
    "blocked in the sync's calls on sampled steps; on a CPU no estimate",
    "between-steps": "evaluating or saving less often: the measured time outside steps",
    "gpu-underutilized": "a batch size or torch.compile, on a GPU: the GPU's idle share",
    "pageable-copy": "pin_memory=True, on a GPU: not estimated (copies are not timed apart)",
    "straggler": "the slow rank's own cause: the time the other ranks wait for it",
    "gpu-imbalance": "DDP instead of DataParallel, on GPUs: the idle GPU's share",
    "io-bound": "storage or more reads in flight: the data wait, as an upper bound",
    "too-many-workers": "fewer workers: RAM and CPU time, not step time",
    "worker-memory": "the dataset's storage: RAM, not step time",
    "gpu-memory-pressure": "allocator settings or a smaller batch: headroom, not speed",
    "gpu-bound": "the GPU's own speed (informational): no estimate",
}


def run_job(tmp: Path, tag: str, case: str, steps: int, settings: tuple[int, int],
            load_s: float, compute_s: float, spin_s: float) -> tuple[float, dict[str, Any]]:  # fmt: skip
    """The job under ``perftop run``: its own step time, and perftop's report."""
    job, rec = tmp / "job.py", tmp / f"{tag}.perftop"
    job.write_text(JOB)
    rec.unlink(missing_ok=True)
    args = [case, str(steps), str(settings[0]), str(settings[1]), str(load_s), str(compute_s),
            str(spin_s)]  # fmt: skip
    r = subprocess.run(
        [sys.executable, "-m", "perftop", "run", "--headless", "--record", str(rec), "--",
         sys.executable, str(job), *args],
        cwd=ROOT, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    line = next((ln for ln in r.stdout.splitlines() if ln.startswith("BENCH ")), None)
    if r.returncode != 0 or line is None:
        raise SystemExit(f"job failed ({r.returncode}): {r.stderr[-2000:]}")
    rep = subprocess.run(
        [sys.executable, "-m", "perftop", "report", "--json", str(rec)],
        cwd=ROOT, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    return json.loads(line[6:])["step_s"], json.loads(rep.stdout)


def advised(hint: dict[str, Any], settings: tuple[int, int]) -> tuple[int, int] | None:
    """The setting the advice names, applied to ``settings`` (workers, threads)."""
    text = " ".join(hint["advice"])
    m = re.search(r"num_workers=(\d+)", text) or re.search(r"num_workers from \d+ to about (\d+)", text)  # fmt: skip
    if m:
        return int(m.group(1)), settings[1]
    m = re.search(r"set_num_threads\((\d+)\)", text)
    if m:
        return settings[0], int(m.group(1))
    return None


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--runs", type=int, default=1, help="runs of each arm (median)")
    a = ap.parse_args()
    rows: list[list[str]] = []
    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        for name, hid, case, steps, before, load_s, compute_s, spin_s in CASES:
            times, hint = [], None
            for k in range(a.runs):
                t, rep = run_job(tmp, f"b{k}", case, steps, before, load_s, compute_s, spin_s)
                times.append(t)
                hint = hint or next((h for h in rep["hints"] if h["id"] == hid), None)
            t0 = statistics.median(times)
            if hint is None:
                rows.append([hid, name, "not shown on this host", "-", f"{t0 * 1e3:.1f} ms", "-", "-"])  # fmt: skip
                continue
            after = advised(hint, before)
            est = hint["est_gain"]
            bound = "up to " if hint["est_gain_text"].startswith("up to") else ""
            est_txt = "none" if est is None else f"{bound}{est:.0%}"
            if after is None:
                rows.append([hid, name, "(no setting advised)", est_txt, f"{t0 * 1e3:.1f} ms", "-", "-"])  # fmt: skip
                continue
            t1 = statistics.median(
                run_job(tmp, f"a{k}", case, steps, after, load_s, compute_s, spin_s)[0]
                for k in range(a.runs)
            )
            gain = 1 - t1 / t0
            miss = "-" if est is None else ("yes" if abs(est - gain) > 0.3 * abs(gain) else "no")
            if bound and miss == "yes":
                miss = "yes (a bound)" if gain <= est else "yes"
            what = f"workers {before[0]}→{after[0]}" if after[0] != before[0] else \
                f"threads {before[1]}→{after[1]}"  # fmt: skip
            rows.append([hid, name, what, est_txt, f"{t0 * 1e3:.1f} → {t1 * 1e3:.1f} ms",
                         f"{gain:.0%}", miss])  # fmt: skip
            print(f"  {hid}: {hint['est_gain_text']}", file=sys.stderr)
    head = ["hint", "workload", "advice applied", "est_gain", "step time", "measured", "miss >30%"]
    widths = [max(len(r[i]) for r in [head, *rows]) for i in range(len(head))]
    for r in [head, *rows]:
        print("  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip())
    print("\nHints whose advice is no setting (or needs a GPU): what the estimate rests on")
    for hid, why in RESTS_ON.items():
        print(f"  {hid}: {why}")


if __name__ == "__main__":
    main()

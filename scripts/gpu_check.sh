#!/usr/bin/env bash
# Prove perftop's GPU path on this machine, with the machine's own torch: runs tests/gpu/
# (real CUDA) and the CUDA-side tests of the suite, then prints a short summary table.
# Op capture (issue 31): tests/gpu/test_capture_cuda.py runs `perftop trace` on a CUDA MLP;
# its top forward/backward ops must be matmuls whose kernels fit in the step's GPU time.
# NCCL (issue 46): tests/gpu/test_cuda.py runs a one-rank NCCL DDP job; its collectives must
# come from NCCL's own flight recorder, each once, the metric's at the user's line.
# Usage: scripts/gpu_check.sh [PYTHON]   (default: python3 on PATH)
set -u
cd "$(dirname "$0")/.."
PY="${1:-python3}"
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
"$PY" - <<'PYEOF' || { echo "gpu_check: this torch sees no CUDA device" >&2; exit 2; }
import torch, sys
ok = torch.cuda.is_available()
print(f"torch {torch.__version__}, CUDA {torch.version.cuda}, "
      f"{torch.cuda.get_device_name(0) if ok else 'no device'}")
sys.exit(0 if ok else 1)
PYEOF
out="$(mktemp -d)"
"$PY" -m pytest -q -rA -p no:cacheprovider tests/gpu tests/test_sync_cuda_fake.py \
    --junitxml="$out/junit.xml" >"$out/log.txt" 2>&1
rc=$?
grep -E "sync-heavy step p50" "$out/log.txt" || true
grep -E "^capture: " "$out/log.txt" || echo "capture: no line (see the capture test's result)"
"$PY" - "$out/junit.xml" <<'PYEOF'
import sys, xml.etree.ElementTree as ET
rows = []
for case in ET.parse(sys.argv[1]).iter("testcase"):
    if case.find("failure") is not None or case.find("error") is not None:
        status = "FAIL"
    elif case.find("skipped") is not None:
        status = "SKIP"
    else:
        status = "ok"
    rows.append((case.get("name", ""), status, float(case.get("time", 0))))
w = max((len(r[0]) for r in rows), default=10)
print(f"{'test'.ljust(w)}  result  seconds")
for name, status, t in rows:
    print(f"{name.ljust(w)}  {status:<6}  {t:7.1f}")
bad = sum(r[1] != "ok" for r in rows)
print(f"{len(rows)} tests, {bad} not ok")
PYEOF
[ $rc -eq 0 ] || echo "details: $out/log.txt"
exit $rc

"""A real Prometheus (Debian's package) scrapes a real `perftop run`: every query of the
Grafana dashboard returns data, per-process series do not grow with epochs, the last
scrape sees the job's end, and `promtool check metrics` accepts the exposition.

The GPU panels need a GPU: the monitor runs with the fake NVML behind pynvml's interface
(the job itself is real CPU training with non-persistent DataLoader workers)."""

from __future__ import annotations

import json
import shutil
import socket
import subprocess
import sys
import time
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from tests.helpers import WORKLOADS

ROOT = Path(__file__).resolve().parent.parent
PROMETHEUS = shutil.which("prometheus")
PROMTOOL = shutil.which("promtool")
LAUNCH = (
    "import sys; from tests.fake_nvml import FakeNvml; sys.modules['pynvml'] = FakeNvml(); "
    "from perftop.cli import main; sys.exit(main(sys.argv[1:]))"
)
pytestmark = pytest.mark.skipif(
    PROMETHEUS is None or PROMTOOL is None, reason="Debian's prometheus is not installed"
)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _get(url: str, timeout: float = 5) -> str:
    with urllib.request.urlopen(url, timeout=timeout) as resp:
        return resp.read().decode()


def _wait_ready(url: str, proc: subprocess.Popen[bytes], log: Path) -> None:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        assert proc.poll() is None, log.read_text()
        try:
            if "Ready" in _get(url + "/-/ready", 1):
                return
        except OSError:
            pass
        time.sleep(0.2)
    raise AssertionError("prometheus never became ready:\n" + log.read_text())


@pytest.fixture(scope="module")
def scraped(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    where = tmp_path_factory.mktemp("prometheus")
    prom_port, perf_port = _free_port(), _free_port()
    cfg = where / "prometheus.yml"
    cfg.write_text(
        "global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\n"
        "scrape_configs:\n  - job_name: perftop\n    static_configs:\n"
        f"      - targets: ['127.0.0.1:{perf_port}']\n"
    )
    log = where / "prometheus.log"
    api = f"http://127.0.0.1:{prom_port}"
    with open(log, "wb") as logf:
        prom = subprocess.Popen(
            [PROMETHEUS, f"--config.file={cfg}", f"--storage.tsdb.path={where / 'data'}",
             f"--web.listen-address=127.0.0.1:{prom_port}", "--log.level=warn"],
            stdin=subprocess.DEVNULL, stdout=logf, stderr=logf,
        )  # fmt: skip
    try:
        _wait_ready(api, prom, log)
        start = time.time()
        job = subprocess.Popen(
            [sys.executable, "-c", LAUNCH, "run", "--headless", "--no-record",
             "--interval", "0.5", "--prometheus", f"127.0.0.1:{perf_port}", "--",
             sys.executable, str(WORKLOADS / "epochs_train.py"), "4", "120"],
            cwd=ROOT, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
            stderr=subprocess.PIPE, text=True,
        )  # fmt: skip
        body = ""
        # a body with both the workers' own reports (sent at a worker's first batch) and
        # the process probe's figures (its samples come a tick apart)
        want = ("perftop_dataloader_batches_total{", "perftop_process_cpu_seconds_total{")
        while job.poll() is None and not all(w in body for w in want):
            time.sleep(0.5)
            try:
                body = _get(f"http://127.0.0.1:{perf_port}/metrics")
            except OSError:
                pass
        out, err = job.communicate(timeout=120)
        assert job.returncode == 0, err
        yield {"api": api, "start": start, "end": time.time(), "body": body, "stderr": err}
    finally:
        prom.terminate()
        prom.wait(timeout=30)


def _query(s: dict[str, Any], path: str, **params: str | float) -> Any:
    url = f"{s['api']}/api/v1/{path}?" + urllib.parse.urlencode(params, doseq=True)
    r = json.loads(_get(url))
    assert r["status"] == "success", r
    return r["data"]


def test_every_dashboard_query_returns_data(scraped: dict[str, Any]) -> None:
    dash = json.loads((ROOT / "dashboards" / "perftop.json").read_text())
    exprs = [t["expr"] for p in dash["panels"] for t in p["targets"]]
    assert len(exprs) >= 12
    empty = []
    for expr in exprs:
        data = _query(scraped, "query_range", query=expr, start=scraped["start"],
                      end=scraped["end"], step=1)  # fmt: skip
        if not any(r["values"] for r in data["result"]):
            empty.append(expr)
    assert not empty, empty


def test_the_last_scrape_sees_the_end(scraped: dict[str, Any]) -> None:
    data = _query(scraped, "query", query='perftop_job_info{state="exited",exit_code="0"}[5m]',
                  time=scraped["end"])  # fmt: skip
    assert data["result"] and data["result"][0]["metric"]["command"].endswith("4 120")
    assert "metrics stay up for a last scrape" in scraped["stderr"]


def test_process_series_do_not_grow_with_epochs(scraped: dict[str, Any]) -> None:
    def series(match: str) -> list[dict[str, str]]:
        return _query(scraped, "series", **{"match[]": match, "start": scraped["start"],
                                             "end": scraped["end"]})  # fmt: skip

    procs = series('{__name__=~"perftop_process_(cpu_seconds_total|rss_bytes|uss_bytes)"}')
    assert procs and all("pid" not in s for s in procs)
    assert {(s["role"], s.get("worker", "")) for s in procs} == {("main", ""), ("worker", "0"),
                                                        ("worker", "1")}  # fmt: skip
    info = series('perftop_process_info{role="worker"}')
    assert (
        len({s["pid"] for s in info}) >= 3
    )  # workers of several epochs (4: the probe may miss one), new pids each


def test_promtool_check_metrics(scraped: dict[str, Any]) -> None:
    body = scraped["body"]
    assert "perftop_process_cpu_seconds_total{" in body and "perftop_job_info{" in body
    r = subprocess.run([PROMTOOL, "check", "metrics"], input=body, capture_output=True,
                       text=True, timeout=30)  # fmt: skip
    assert r.returncode == 0 and not r.stdout.strip() and not r.stderr.strip(), r

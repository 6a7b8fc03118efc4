"""Labels at the default 160×48 (issue 45): the Host panel breaks its lines between
figures instead of cutting "load" and "net", the key bar lists the capture key, and a
process is named by what it runs (Ray's daemons are not all "python")."""

from __future__ import annotations

from rich.text import Text
from textual.widgets._footer import FooterKey

from perftop.fmt import clip, process_label
from perftop.tui.widgets.footer import KeysFooter
from perftop.tui.widgets.host import HostPanel
from tests.tui.fakes import snapshot
from tests.tui.test_app import aio, showing


@aio
async def test_the_host_panel_keeps_load_and_net_whole_and_the_footer_lists_t() -> None:
    async with showing(snapshot()) as (app, pilot):
        panel = app.query_one(HostPanel)
        body = panel.render_body(app.shown)
        text = "\n".join(t.plain for t in _texts(body))
        width = panel.body_width
        assert all(len(ln) <= width for ln in text.splitlines()), (width, text)
        assert "load 7.9 6.2 4.0" in text
        assert "net ↓" in text and "↑" in text.split("net ↓", 1)[1].splitlines()[0]
        keys = {k.key for k in app.query_one(KeysFooter).query(FooterKey)}
        assert "t" in keys


def _texts(r):
    """The lines of a panel body (a Group of Texts, perhaps inside the probe status)."""
    if isinstance(r, Text):
        return [r]
    out = []
    for x in getattr(r, "renderables", ()):
        out.extend(_texts(x))
    return out


def test_a_process_is_named_by_what_it_runs() -> None:
    """The command lines of a Ray Train run's processes (as psutil reads them)."""
    cases = {
        ("python", "/usr/bin/python3 -u /v/ray/_private/log_monitor.py --logs-dir=/t"): (
            "log_monitor.py"
        ),
        ("raylet", "/v/ray/core/src/ray/raylet/raylet --raylet_socket_name=/t/s"): "raylet",
        ("gcs_server", "/v/ray/core/src/ray/gcs/gcs_server --port=6379"): "gcs_server",
        # cut to the column (40), where it shows it was cut
        ("python", "ray::RayTrainWorker._RayTrainWorker__execute.get_next"): (
            "ray::RayTrainWorker._RayTrainWorker__ex…"
        ),
        # (a script of transformers' examples, by its real name: 43 characters)
        ("python3", "/usr/bin/python3 run_speech_recognition_seq2seq_streaming.py --x 1"): (
            "run_speech_recognition_seq2seq_streamin…"
        ),
        ("python", "ray::IDLE"): "ray::IDLE",
        ("python3", "python3 -m torch.distributed.run --nproc-per-node 2 t.py"): (
            "-m torch.distributed.run"
        ),
        ("python", ""): "python",
    }
    for (name, cmd), want in cases.items():
        assert process_label(name, cmd) == want, (name, cmd)
    assert clip("python train.py --steps 400", 26) == "python train.py --steps 4…"
    assert clip("python train.py", 15) == "python train.py"


def test_a_ranks_workers_name_it_and_a_stopped_process_says_so() -> None:
    """Every rank's loader numbers its workers from 0: in a DDP job the Processes table's
    "worker 0" rows were as many as the ranks, none saying whose. A rank's worker is named
    by it (``r1 worker 0``); a lone trainer's are as before. A process stopped (``kill
    -STOP``, a scheduler's suspend) says so before its command, as htop's state ``T``."""
    from dataclasses import replace

    from perftop.model.roles import assign_roles
    from perftop.model.snapshot import Loader, Meta, ProcRow, Snapshot, Trainer
    from perftop.tui.widgets.processes import table_rows

    def roles(world: int) -> tuple:
        ranks = range(world)
        trainers = [Trainer(200 + r, 100, "h", (), r, r, world, "cpu", "") for r in ranks]
        loaders = [Loader(200 + r, 0, 2, 8, False, 1, False, ((0, 300 + r),), "", 0)
                   for r in ranks]  # fmt: skip
        return assign_roles(Meta(job_pid=100), trainers, loaders)

    ddp = Snapshot(roles=roles(2), processes=(ProcRow(201, 100, "python", "", "stopped"),))
    labels = {pid: cells[0].plain for pid, cells in table_rows(ddp).items()}
    assert labels == {"200": "rank 0", "201": "rank 1", "300": "r0 worker 0",
                      "301": "r1 worker 0", "100": "other"}, labels  # fmt: skip
    command = table_rows(ddp)["201"][-1]
    assert command.plain == "[stopped] python" and command.value == "python", command
    lone = {pid: cells[0].plain for pid, cells in table_rows(Snapshot(roles=roles(1))).items()}
    assert lone == {"200": "main", "300": "worker 0", "100": "other"}, lone
    running = replace(ddp, processes=(ProcRow(201, 100, "python", "", "sleeping"),))
    assert table_rows(running)["201"][-1].plain == "python"


def test_a_worker_no_tick_saw_is_named_by_its_parents_command_where_it_was_forked() -> None:
    """A short epoch's DataLoader worker that ended before any probe tick read it (accelerate's
    example at 250 steps a second) was a struck-through row with no command beside its
    siblings'. A forked worker runs its parent's command line (fork copies it), and says so;
    a spawned one's is its own (``python -c "from multiprocessing.spawn ..."``): none."""
    from dataclasses import replace

    from perftop.model.roles import assign_roles
    from perftop.model.snapshot import Loader, Meta, ProcRow, Snapshot, Trainer
    from perftop.model.workers import WorkerRow
    from perftop.tui.widgets.processes import table_rows

    loader = Loader(200, 0, 1, 8, False, 1, False, ((0, 300),), "", 0, start_method="fork")
    trainer = Trainer(200, 100, "h", (), None, None, None, "cpu", "")
    main = ProcRow(200, 100, "python", "python acc_ddp.py --epochs 6")
    done = WorkerRow(300, 200, 0, 1, 1.0, 1.2, True, 4, 0.1, 0.1)
    snap = Snapshot(
        roles=assign_roles(Meta(job_pid=100), [trainer], [loader]),
        loaders=(loader,),
        workers=(done,),
        processes=(main,),
    )
    command = table_rows(snap)["300"][-1]
    assert command.plain == table_rows(snap)["200"][-1].plain == "acc_ddp.py", command
    assert "strike" in str(command.style), command.style  # ended, as before
    spawned = replace(snap, loaders=(replace(loader, start_method="spawn"),))
    assert table_rows(spawned)["300"][-1].plain == ""

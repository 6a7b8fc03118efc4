"""The documentation cannot drift from the CLI: the commands its pages show are run here, read
from the pages' own text.

A shell example in README.md or docs/ that runs perftop is marked, invisibly to a reader, by
the HTML comment on the line before its fence: ``<!-- docs-test: run -->`` (every command in
it runs here, in the order of the site's nav, in one directory, so a page may read what an
earlier one recorded) or ``<!-- docs-test: skip (why) -->``. ``<!-- docs-test: file NAME -->``
before a fenced block writes it to NAME first (the example training). An unmarked example
fails the check, so a new one is either run or says why it cannot be.
"""

from __future__ import annotations

import ast
import importlib
import inspect
import json
import re
import shlex
import subprocess
import sys
import unicodedata
from dataclasses import dataclass
from pathlib import Path

import pytest

from perftop.cli import DOCS_PAGES, build_parser
from perftop.hints import RULES
from perftop.hints.base import Rule

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"
FENCE = re.compile(r"^```(\w*)\n(.*?)^```$", re.S | re.M)
MARK = re.compile(r"<!-- docs-test: (run|file (\S+)|skip \((.+)\)) -->")
# What the docs must show running (the rest need a terminal, a pid, a host or nodes).
MUST_RUN = {"run", "report", "export", "diff", "demo", "ls", "--help"}


@dataclass(frozen=True)
class Block:
    page: str
    line: int
    lang: str
    body: str
    mark: str  # "run", "file", "skip" or "" (unmarked)
    arg: str  # the file name, or why it is skipped


def nav() -> list[Path]:
    """The pages in the order of mkdocs.yml's nav."""
    names = re.findall(r"^\s+- [^:]+: (\S+\.md)$", (ROOT / "mkdocs.yml").read_text(), re.M)
    return [DOCS / n for n in names]


def blocks(path: Path) -> list[Block]:
    text = path.read_text()
    out = []
    for m in FENCE.finditer(text):
        before = text[: m.start()].rstrip("\n").rsplit("\n", 1)[-1]
        mk = MARK.fullmatch(before.strip())
        kind = "" if mk is None else mk.group(1).split(" ")[0]
        arg = "" if mk is None else (mk.group(2) or mk.group(3) or "")
        line = text.count("\n", 0, m.start()) + 1
        out.append(Block(path.name, line, m.group(1), m.group(2), kind, arg))
    return out


def commands(body: str) -> list[list[str]]:
    """Each command of a shell block: continuations joined, comments dropped."""
    out = []
    for line in body.replace("\\\n", " ").splitlines():
        argv = shlex.split(line, comments=True)
        if argv:
            out.append(argv)
    return out


def slug(heading: str) -> str:
    """The anchor MkDocs (Python-Markdown's toc) gives a heading."""
    text = unicodedata.normalize("NFKD", heading.replace("`", "")).encode("ascii", "ignore")
    return re.sub(r"[-\s]+", "-", re.sub(r"[^\w\s-]", "", text.decode()).strip().lower())


def test_every_shell_example_is_run_or_says_why_not() -> None:
    run: set[str] = set()
    for path in [ROOT / "README.md", *nav()]:
        for b in blocks(path):
            cmds = commands(b.body) if b.lang == "sh" else []
            shows_perftop = any(c[0] == "perftop" for c in cmds)
            where = f"{b.page}:{b.line}"
            if b.mark == "run":
                assert b.lang == "sh" and cmds, where
                assert all(c[0] == "perftop" for c in cmds), f"{where}: only perftop runs here"
                run |= {c[1] for c in cmds}
            elif shows_perftop:
                assert b.mark == "skip" and b.arg.strip(), f"{where}: mark it run or skip (why)"
    assert run >= MUST_RUN, f"no run example of {sorted(MUST_RUN - run)}"


def test_every_page_is_in_the_nav_and_the_readme_links_resolve() -> None:
    assert sorted(nav()) == sorted(DOCS.glob("*.md"))
    readme = (ROOT / "README.md").read_text()
    links = re.findall(r"\]\(([^)#]+\.md)(?:#([\w-]+))?\)", readme)
    assert {p for p, _ in links} >= {str(p.relative_to(ROOT)) for p in nav()}
    for target, anchor in links:
        text = (ROOT / target).read_text()
        if anchor:
            heads = re.findall(r"^#+ (.+)$", text, re.M)
            assert anchor in {slug(h) for h in heads}, f"{target}#{anchor}"


def test_each_help_names_its_docs_page() -> None:
    parser = build_parser()
    assert "docs/index.md" in parser.format_help()
    sub = next(a for a in parser._actions if a.dest == "command")
    for name, p in sub.choices.items():  # type: ignore[union-attr]
        page = DOCS_PAGES[name]
        assert page in p.format_help(), name
        assert f"perftop {name}" in (ROOT / page).read_text(), f"{page} says nothing of {name}"


@dataclass(frozen=True)
class Ran:
    where: str
    argv: list[str]
    proc: subprocess.CompletedProcess[str]


@pytest.fixture(scope="module")
def ran(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[Ran]]:
    """Every command of the run blocks, page by page in the nav's order, in one directory."""
    cwd = tmp_path_factory.mktemp("docs")
    out: list[Ran] = []
    for path in nav():
        for b in blocks(path):
            if b.mark == "file":
                (cwd / b.arg).write_text(b.body)
            elif b.mark == "run":
                for argv in commands(b.body):
                    proc = subprocess.run(
                        [sys.executable, "-m", "perftop", *argv[1:]],
                        cwd=cwd, capture_output=True, text=True, timeout=180,
                    )  # fmt: skip
                    out.append(Ran(f"{b.page}:{b.line}", argv, proc))
    return cwd, out


def _opt(argv: list[str], name: str) -> str | None:
    return argv[argv.index(name) + 1] if name in argv else None


def test_the_docs_commands_run_and_do_what_they_say(ran: tuple[Path, list[Ran]]) -> None:
    cwd, out = ran
    assert out
    for r in out:
        said = f"{r.where}: {shlex.join(r.argv)}\n{r.proc.stdout[-2000:]}\n{r.proc.stderr[-2000:]}"
        assert r.proc.returncode == 0, said
        if "--help" in r.argv:
            assert "docs/" in r.proc.stdout, said
        if "--json" in r.argv:
            assert isinstance(json.loads(r.proc.stdout), dict), said
        elif r.argv[1] in ("report", "diff"):
            assert "step" in r.proc.stdout, said
        if (rec := _opt(r.argv, "--record")) is not None:
            assert (cwd / rec).stat().st_size > 0, said
        if (trace := _opt(r.argv, "--chrome-trace")) is not None:
            events = json.loads((cwd / trace).read_text())
            events = events["traceEvents"] if isinstance(events, dict) else events
            assert any(e.get("ph") == "X" for e in events), said
        if (csv := _opt(r.argv, "--csv")) is not None:
            assert (cwd / csv / "steps.csv").read_text().count("\n") > 1, said


def test_every_key_of_the_json_report_is_documented(ran: tuple[Path, list[Ran]]) -> None:
    """recordings.md's table of the JSON report names each key a real report has, and each
    key of its `steps` (between_s among them)."""
    _, out = ran
    reports = [json.loads(r.proc.stdout) for r in out if r.argv[1:3] == ["report", "--json"]]
    assert reports
    page = (DOCS / "recordings.md").read_text()
    table = page[page.index("## The JSON report") :]
    rows = {}
    for row in re.findall(r"^\| (.+?) \| (.+) \|$", table, re.M):
        for key in re.findall(r"`(\w+)`", row[0]):
            rows[key] = row[1]
    for report in reports:
        assert set(report) <= set(rows), sorted(set(report) - set(rows))
        steps_doc = set(re.findall(r"`(\w+)`", rows["steps"]))
        assert set(report["steps"]) <= steps_doc, sorted(set(report["steps"]) - steps_doc)


# What each hint's section of docs/hints.md says (bold labels).
HINT_PARTS = ("What it reads.", "When it fires.", "What it advises", "Estimated gain.",
              "Measured gain.", "Near miss.")  # fmt: skip


def sections(path: Path) -> dict[str, str]:
    """A page's ``##`` sections: heading (backticks dropped) to body."""
    parts = re.split(r"^## (.+)$", path.read_text(), flags=re.M)
    return {h.replace("`", "").strip(): body for h, body in zip(parts[1::2], parts[2::2])}


def hint_ids(rule: Rule, seen: frozenset[str] = frozenset()) -> set[str]:
    """The ids a rule can give: the ``id=`` of each ``Hint(...)`` it builds, from its code,
    and from the helpers of its own module that it calls (one builder shared by two rules)."""
    ids = set()
    for node in ast.walk(ast.parse(inspect.getsource(rule))):
        if not isinstance(node, ast.Call):
            continue
        name = getattr(node.func, "id", None)
        if name == "Hint":
            v = next((k.value for k in node.keywords if k.arg == "id"), None)
            assert isinstance(v, ast.Constant) and isinstance(v.value, str), rule.__name__
            ids.add(v.value)
            continue
        helper = rule.__globals__.get(name) if name else None
        if (inspect.isfunction(helper) and helper.__module__ == rule.__module__
                and name not in seen):  # fmt: skip
            ids |= hint_ids(helper, seen | {rule.__name__, name})
    return ids


def test_every_hint_id_the_engine_gives_has_its_section() -> None:
    """Each id a rule of the engine can give has its own section in docs/hints.md, naming
    the rule and saying what it reads, when it fires, its advice, gains and near miss; the
    README links input-bound's section, and the page's table links every section."""
    page = sections(DOCS / "hints.md")
    text = (DOCS / "hints.md").read_text()
    found: set[str] = set()
    for rule in RULES:
        ids = hint_ids(rule)
        assert ids, f"{rule.__name__}: no Hint(id=...) in its code"
        for hid in ids:
            assert hid in page, f"docs/hints.md has no section for {hid}"
            body = page[hid]
            assert f"`{rule.__name__}`" in body, f"{hid}: its section does not name its rule"
            missing = [p for p in HINT_PARTS if f"**{p}" not in body]
            assert not missing, f"{hid}: its section lacks {missing}"
            assert f"](#{hid})" in text, f"the hints table does not link {hid}"
        found |= ids
    assert len(found) >= len(RULES)
    assert "](docs/hints.md#input-bound)" in (ROOT / "README.md").read_text()


def test_the_hints_page_gives_the_codes_thresholds() -> None:
    """Each `NAME = value` a section of docs/hints.md gives (spaced: `OMP_NUM_THREADS=1` is
    no constant) is NAME's value in the first module the section names (`perftop/....py`
    in backticks) that has it: the page cannot drift from the rules' thresholds."""
    checked = 0
    for head, body in sections(DOCS / "hints.md").items():
        mods = [importlib.import_module("perftop." + m.replace("/", "."))
                for m in re.findall(r"`perftop/([\w/]+)\.py`", body)]  # fmt: skip
        for name, value in re.findall(r"`([A-Z][A-Z0-9_]*)\s+=\s+([^`]+)`", body):
            mod = next((m for m in mods if hasattr(m, name)), None)
            assert mod is not None, f"{head}: {name} is in none of {[m.__name__ for m in mods]}"
            said = eval(value, {"__builtins__": {}, **vars(mod)})  # the page's own text
            assert getattr(mod, name) == said, (
                f"{head}: {name} is {getattr(mod, name)}, not {value}"
            )
            checked += 1
    assert checked >= 30

"""The README's Python examples (and those of the docs it points to) run as written (the deployment
loop: ``tests/cli/test_export.py``, with the file it deploys)."""

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import cli_environment, run_block, trajrl

README = Path(__file__).resolve().parents[2] / "README.md"


def test_the_api_example_in_the_readme_runs(tmp_path):
    out = run_block("API", tmp_path)
    assert re.search(r"^-?\d+\.\d+ outputs/", out, flags=re.M)


def test_the_hand_written_loop_in_the_readme_runs(tmp_path):
    out = run_block("hand-written loop", tmp_path)
    assert re.search(r"loss \d+\.\d+, \d+ frames stored, \d+ in flight", out)


def test_the_padded_extend_in_the_docs_runs(tmp_path):
    """docs/storage-and-topologies.md: a [3, 9] batch of your own with its mask: 17 valid steps, 3 episodes."""
    out = run_block("padded extend", tmp_path)
    assert "17 steps stored, 3 episodes" in out


def test_the_readme_is_a_short_reference_and_the_indexes_list_every_page():
    """README at most 200 lines; docs/ is one folder of pages, each linked from docs/index.md, which links the lab
    notebook in one line; every page under notebook/ (run logs, screens, histories) linked from notebook/index.md."""
    assert len(README.read_text().splitlines()) <= 200
    docs, notebook = README.parent / "docs", README.parent / "notebook"
    assert [p.name for p in docs.iterdir() if p.is_dir()] == []
    for folder, pages in [(docs, docs.glob("*.md")), (notebook, notebook.rglob("*.md"))]:
        index = (folder / "index.md").read_text()
        listed = sorted(p.relative_to(folder).as_posix() for p in pages if p.name != "index.md")
        assert listed and [p for p in listed if f"]({p})" not in index] == []
    assert "](../notebook/index.md)" in (docs / "index.md").read_text()


def test_every_relative_link_in_the_readme_the_docs_and_the_notebook_resolves():
    """Each `](path)` link of README.md, of every page of docs/ and of every page under notebook/ names a file
    that exists."""
    root = README.parent
    pages = [README, *sorted((root / "docs").glob("*.md")), *sorted((root / "notebook").rglob("*.md"))]
    broken = []
    for page in pages:
        text = re.sub(r"```.*?```", "", page.read_text(), flags=re.S)
        for target in re.findall(r"\]\(([^)\s]+)\)", text):
            path = target.partition("#")[0]
            if path and not re.match(r"[a-z]+:", path) and not (page.parent / path).exists():
                broken.append(f"{page.relative_to(root)}: {target}")
    assert broken == []


#: A commit's hash as the pages would quote it: a word of 7 to 40 lowercase hex digits with at least one digit and
#: one letter (not a number, not a word such as "added"), not part of a path, a colour (#), a version or an
#: identifier (no letter, digit, "_", "-", ".", "/" or "#" either side).
COMMIT = re.compile(r"(?<![\w#./-])(?=[a-f]*\d)(?=\d*[a-f])[0-9a-f]{7,40}(?![\w/-]|\.\w)")
#: A working session, an issue's number ("issue 87", "#87").
SESSION = re.compile(r"\bsessions?\b", re.I)
ISSUE = re.compile(r"\bissues? \d+|(?<![\w&])#\d+\b", re.I)


def chronicle_lines(path: Path, name: str) -> list[str]:
    """``name:line: token`` for each commit hash, "session" or issue number on a line of ``path``."""
    found = []
    for number, line in enumerate(path.read_text().splitlines(), 1):
        for pattern in (COMMIT, SESSION, ISSUE):
            found += [f"{name}:{number}: {m.group(0)}" for m in pattern.finditer(line)]
    return found


def test_the_chronicle_patterns_find_what_they_should_and_nothing_else(tmp_path):
    page = tmp_path / "page.md"
    page.write_text(
        "at 1b1d2b2 and c19e015's;\nits Sessions\nIssue 61, #87\n"
        "deadbeef 1234567 #ff00aa colour abcdef0_x path/1b1d2b2.md 1b1d2b2-dir v0.1.2 added 2026-11-29 x86_64\n"
    )
    assert chronicle_lines(page, "page.md") == [
        "page.md:1: 1b1d2b2",
        "page.md:1: c19e015",
        "page.md:2: Sessions",
        "page.md:3: Issue 61",
        "page.md:3: #87",
    ]


def test_the_docs_and_configs_carry_no_commit_session_or_issue_number():
    """docs/*.md (the notebook apart: it is the chronicle) and every YAML file under configs/ say what is: no commit
    hash, no "session", no issue number; each offending line named."""
    root = README.parent
    pages = [*sorted((root / "docs").glob("*.md")), *sorted((root / "configs").rglob("*.yaml"))]
    assert [hit for page in pages for hit in chronicle_lines(page, str(page.relative_to(root)))] == []


def test_the_readme_carries_no_commit_session_or_issue_number():
    """README.md likewise: a figure carries its date, its commit is in the notebook's entry."""
    assert chronicle_lines(README, "README.md") == []


def test_the_help_of_every_algorithm_carries_no_commit_session_or_issue_number(tmp_path):
    """``python -m trajrl algo=<name> --help`` and ``--help-all``: every description says what is."""
    hits = []
    for algo in ("rsac", "r2d2", "ppo"):
        for flag in ("--help", "--help-all"):
            shown = trajrl(f"algo={algo}", flag, cwd=tmp_path)
            assert shown.returncode == 0, shown.stderr[-2000:]
            page = tmp_path / f"{algo}{flag}.txt"
            page.write_text(shown.stdout)
            hits += chronicle_lines(page, f"algo={algo} {flag}")
    assert hits == []


def results_rows(text: str) -> dict[str, list[str]]:
    """``{row name: cells}`` of a page's results table (the rows whose first cell names a preset or the default)."""
    rows = {}
    for line in text.splitlines():
        cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
        name = re.match(r"\**(default)\b|`(\w+)`", cells[0]) if line.startswith("| ") else None
        if name and len(cells) >= 8:
            rows.setdefault(name.group(1) or name.group(2), cells)
    return rows


def test_the_readme_and_results_md_agree_on_every_figure_they_both_show():
    """Each row of the README's results table is a row of docs/results.md: its date, threshold, budget, counts
    and median frames appear in the row of the same name there."""
    ours = results_rows(README.read_text())
    theirs = results_rows((README.parent / "docs" / "results.md").read_text())
    assert len(ours) >= 5 and set(ours) <= set(theirs)
    for name, cells in ours.items():
        row = " | ".join(theirs[name])
        for cell in cells[1:]:
            for figure in re.findall(r"\d[\d,./-]*\d|\d|not reached|confirmation|screen", cell):
                assert figure in row, (name, figure, row)


def test_the_readme_walk_through_on_an_environment_trajrl_does_not_ship_runs_as_printed(tmp_path):
    """README's "train on your environment" block, each line run as printed in a shell (the venv's ``trajrl`` and
    ``python`` first on PATH) on Acrobot-v1 (gymnasium's, not trajrl's): check-env, a short run, evaluate, export."""
    pytest.importorskip("onnxruntime")
    block = re.search(r"```bash\n# your environment\n(.*?)```", README.read_text(), flags=re.S)[1]
    commands = [line for line in block.splitlines() if line.strip() and not line.startswith("#")]
    assert [c.split()[0:2] for c in commands] == [
        ["trajrl", "check-env"],
        ["python", "-m"],
        ["trajrl", "evaluate"],
        ["trajrl", "export"],
    ]
    env = cli_environment()
    env["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), env.get("PATH", "")])
    said = []
    for command in commands:
        done = subprocess.run(
            command,
            shell=True,
            cwd=tmp_path,
            env=env,
            capture_output=True,
            text=True,
            timeout=300,
            stdin=subprocess.DEVNULL,
        )
        assert done.returncode == 0, (command, done.stderr[-3000:])
        said.append(done.stdout + done.stderr)
    assert "nothing refused" in said[0]
    assert "== trajrl run finished ==" in said[1] and (tmp_path / "outputs/acrobot/checkpoints/best.pt").exists()
    assert re.search(r"return -?\d+\.\d+ ± \d+\.\d+ over 5 deterministic episodes", said[2])
    assert "checked: the same actions as trajrl's greedy agent over 10 episodes" in said[3]
    assert (tmp_path / "acrobot.onnx").stat().st_size > 0

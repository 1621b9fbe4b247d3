"""The README's Python examples (and those of the docs it points to) run as written (the deployment
loop: ``tests/cli/test_export.py``, with the file it deploys)."""

import re
from pathlib import Path

from helpers import run_block

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


def test_the_readme_is_a_short_reference_and_the_docs_index_lists_every_page():
    """README at most 200 lines; every user page in docs/ linked from docs/index.md, every page
    under docs/benchmarks/ (run logs, screens, histories) from docs/benchmarks/index.md."""
    assert len(README.read_text().splitlines()) <= 200
    docs = README.parent / "docs"
    for folder, pages in [(docs, docs.glob("*.md")), (docs / "benchmarks", (docs / "benchmarks").rglob("*.md"))]:
        index = (folder / "index.md").read_text()
        listed = sorted(str(p.relative_to(folder)) for p in pages if p.name != "index.md")
        assert listed and [p for p in listed if f"]({p})" not in index] == []
    assert "](benchmarks/index.md)" in (docs / "index.md").read_text()
    assert sorted(p.name for p in docs.iterdir() if p.is_dir()) == ["benchmarks"]


def test_every_relative_link_in_the_readme_and_the_docs_resolves():
    """Each `](path)` link of README.md and of every page under docs/ names a file that exists."""
    pages = [README, *sorted((README.parent / "docs").rglob("*.md"))]
    broken = []
    for page in pages:
        text = re.sub(r"```.*?```", "", page.read_text(), flags=re.S)
        for target in re.findall(r"\]\(([^)\s]+)\)", text):
            path = target.partition("#")[0]
            if path and not re.match(r"[a-z]+:", path) and not (page.parent / path).exists():
                broken.append(f"{page.relative_to(README.parent)}: {target}")
    assert broken == []

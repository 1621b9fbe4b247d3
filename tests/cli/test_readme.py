"""The README's Python examples run as written."""

import re
import subprocess
import sys
from pathlib import Path

README = Path(__file__).resolve().parents[2] / "README.md"


def run_block(title: str, tmp_path) -> str:
    blocks = re.findall(r"```python\n(.*?)```", README.read_text(), flags=re.S)
    script = tmp_path / "example.py"
    script.write_text(next(b for b in blocks if b.startswith(f"# {title}\n")))
    proc = subprocess.run(
        [sys.executable, str(script)],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=180,
        stdin=subprocess.DEVNULL,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc.stdout


def test_the_api_example_in_the_readme_runs(tmp_path):
    out = run_block("API", tmp_path)
    assert re.search(r"^-?\d+\.\d+ outputs/", out, flags=re.M)


def test_the_hand_written_loop_in_the_readme_runs(tmp_path):
    out = run_block("hand-written loop", tmp_path)
    assert re.search(r"loss \d+\.\d+, \d+ frames stored, \d+ in flight", out)


def test_the_padded_extend_in_the_readme_runs(tmp_path):
    """A user's own [3, 9] batch with its mask: its 17 valid steps stored as 3 episodes."""
    out = run_block("padded extend", tmp_path)
    assert "17 steps stored, 3 episodes" in out


def test_the_readme_is_a_short_reference_and_the_docs_index_lists_every_page():
    """README at most 200 lines; every page under docs/ linked from docs/index.md."""
    assert len(README.read_text().splitlines()) <= 200
    docs = README.parent / "docs"
    index = (docs / "index.md").read_text()
    pages = sorted(str(p.relative_to(docs)) for p in docs.rglob("*.md") if p.name != "index.md")
    assert pages and [p for p in pages if f"]({p})" not in index] == []

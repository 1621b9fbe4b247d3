"""``trajrl plot <run or multirun dir>``: learning-curve PNGs.

One figure per topic (returns, episode lengths, masks and staleness, throughput)
in ``<dir>/plots/``. In a multirun, runs that differ only in ``seed`` are one
curve: the mean across seeds, with the band between the lowest and the highest
seed (and the seeds as thin lines).
"""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from trajrl.report.runs import find_runs, group_runs, on_common_frames  # noqa: E402

#: Figure name -> panels, each (title, [metrics drawn on it]).
FIGURES = {
    "returns": [
        ("evaluation return (deterministic)", ["eval/return"]),
        ("training episode return", ["episode/return"]),
    ],
    "lengths": [("training episode length", ["episode/length"]), ("evaluation episode length", ["eval/length"])],
    "masks": [
        ("valid fraction of training batches", ["sample/valid_frac", "batch/valid_frac"]),
        ("sequence length in training batches", ["sample/length", "batch/length"]),
        ("staleness (policy versions)", ["sample/staleness_mean", "batch/staleness_mean"]),
        ("buffer fill fraction", ["buffer/fill_frac"]),
    ],
    "throughput": [
        ("frames/s: stepped, stored or learnt", ["collect/frames_per_s", "time/frames_per_s_recent"]),
        ("updates/s", ["train/updates_per_s"]),
        (
            "learner time split (fraction)",
            ["time/sample_frac", "time/update_frac", "time/eval_frac", "time/wait_frac", "time/collect_frac"],
        ),
    ],
}


def plot(path: str | Path, out: str | Path | None = None) -> list[Path]:
    """Write the figures for the run(s) under ``path``; return the PNG paths."""
    groups = group_runs(find_runs(path))
    out = Path(out) if out is not None else Path(path) / "plots"
    out.mkdir(parents=True, exist_ok=True)
    written = []
    for figure, panels in FIGURES.items():
        fig, axes = plt.subplots(1, len(panels), figsize=(5.2 * len(panels), 3.8), squeeze=False)
        drawn = False
        for ax, (title, metrics) in zip(axes[0], panels):
            for label, runs in groups.items():
                for metric in metrics:
                    frames, values = on_common_frames(runs, metric)
                    if frames.size == 0:
                        continue
                    drawn = True
                    name = label if len(metrics) == 1 else f"{label}: {metric}"
                    seeds = f" ({len(runs)} seeds)" if len(runs) > 1 else ""
                    (line,) = ax.plot(frames, values.mean(0), label=name + seeds, lw=1.8)
                    if len(runs) > 1:
                        ax.fill_between(frames, values.min(0), values.max(0), color=line.get_color(), alpha=0.2)
                        for row in values:
                            ax.plot(frames, row, color=line.get_color(), lw=0.5, alpha=0.5)
            ax.set_title(title, fontsize=10)
            ax.set_xlabel("frames")
            ax.grid(alpha=0.3)
            if ax.lines:
                ax.legend(fontsize=7)
        if drawn:
            fig.suptitle(f"{Path(path).resolve().name}: mean across seeds, band = min..max", fontsize=10)
            fig.tight_layout()
            fig.savefig(out / f"{figure}.png", dpi=100)
            written.append(out / f"{figure}.png")
        plt.close(fig)
    return written

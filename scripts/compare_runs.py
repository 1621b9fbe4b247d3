"""Whether two runs are the same run: ``python scripts/compare_runs.py <run a> <run b>``.

Prints every difference ``deterministic=true`` rules out (metrics.csv but its clocks and rates, every
tensor of latest.pt and best.pt) and exits 1 if there is one, 0 if the two are the same run. How a
failing seed is read again, and how a change is shown to change nothing: docs/development.md."""

from __future__ import annotations

import argparse
import sys

from trajrl.report.compare import differences


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("run_a")
    parser.add_argument("run_b")
    parser.add_argument("--most", type=int, default=20, help="differences listed of each kind")
    args = parser.parse_args()
    found = differences(args.run_a, args.run_b, args.most)
    print("\n".join(found) if found else f"the same run: {args.run_a} and {args.run_b}")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())

"""The default run's learner alone, two ways of using a second core, against one thread:
torch's intra-op threads (``torch.set_num_threads``) and the next batch sampled on a
background thread while the current one is learnt from (what TorchRL's ``prefetch`` does);
and the learner's one thread while another process keeps the other core busy (a loop of
Python that shares no data with it: what a second busy core costs the first on this machine,
where a run's workers would step environments).

    python scripts/learner_threads.py              # one torch thread
    OMP_NUM_THREADS=2 python scripts/learner_threads.py --threads 2

Prints gradient steps a second, the median of 3 alternated runs of 200 steps each way
(sampled from 20,000 frames the default run's collector stored, ``collector=sync``).
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import torch

import trajrl


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--threads", type=int, default=1, help="torch's intra-op threads for the learner")
    parser.add_argument("--updates", type=int, default=200)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    cfg = trajrl.compose(["collector=sync", "env.num_envs=8", "collector.frames_per_batch=800", "logger=none"])
    with trajrl.build(cfg) as pipe, ThreadPoolExecutor(1) as sampler:
        for _ in pipe.collector:
            if pipe.buffer.write_count >= 20_000:
                break
        algo, sequences = pipe.algo, pipe.sequences

        def one_thread(steps: int) -> float:
            start = time.perf_counter()
            for _ in range(steps):
                algo.update(sequences.sample())
            return steps / (time.perf_counter() - start)

        def sampled_beside(steps: int) -> float:
            start = time.perf_counter()
            ahead = sampler.submit(sequences.sample)
            for _ in range(steps):
                batch = ahead.result()
                ahead = sampler.submit(sequences.sample)
                algo.update(batch)
            ahead.result()
            return steps / (time.perf_counter() - start)

        def beside_a_busy_core(steps: int) -> float:
            spinner = subprocess.Popen([sys.executable, "-c", "while True: pass"])
            try:
                time.sleep(0.5)  # under way
                return one_thread(steps)
            finally:
                spinner.kill()
                spinner.wait()

        one_thread(20)  # warm-up
        ways = {
            "sampled in the learner's thread": one_thread,
            "sampled on a background thread": sampled_beside,
            "one thread, the other core busy": beside_a_busy_core,
        }
        rates = {way: [] for way in ways}
        for _ in range(args.repeats):
            for way, measure in ways.items():
                rates[way].append(measure(args.updates))
    print(f"# the default run's learner alone, torch threads: {torch.get_num_threads()}, gradient steps/s")
    for way, measured in rates.items():
        print(f"| {way} | {float(np.median(measured)):.1f} |")


if __name__ == "__main__":
    main()

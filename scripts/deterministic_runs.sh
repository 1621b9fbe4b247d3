#!/bin/bash
# A checkout's deterministic runs, to compare with another's (scripts/compare_runs.py): each algorithm at
# 4,000 frames and each preset at 2,000 (the recurrent DQN's at 3,000: its warm-up is 2,000), two at a time.
#   scripts/deterministic_runs.sh <out dir> <checkout>     e.g. /tmp/before /tmp/old-clone; /tmp/after .
#   for r in /tmp/before/*/; do python scripts/compare_runs.py $r /tmp/after/$(basename $r); done
set -u
out=$(realpath -m "$1"); code=$(realpath "${2:-.}"); py=${PYTHON:-$code/.venv/bin/python}
mkdir -p "$out"; cd "$code"; export PYTHONPATH=$code OMP_NUM_THREADS=1
one() { name=$1; shift; "$py" -m trajrl deterministic=true logger.plots=false hydra.run.dir="$out/$name" "$@" \
  > "$out/$name.log" 2>&1; echo "$name rc=$?" >> "$out/done.txt"; }
one rsac total_frames=4000 & one r2d2 algo=r2d2 total_frames=4000 & wait
one ppo algo=ppo total_frames=4000 &
for f in configs/experiment/*.yaml; do
  e=$(basename "$f" .yaml); frames=2000; [[ $e == r2d2_* ]] && frames=3000
  one "x_$e" "experiment=$e" "total_frames=$frames" loop.eval_every_frames=1000 loop.eval_episodes=2 &
  while [ "$(jobs -rp | wc -l)" -ge 2 ]; do sleep 1; done
done
wait

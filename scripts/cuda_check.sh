#!/usr/bin/env bash
# device=cuda end to end: the tests marked for CUDA, every preset in configs/experiment/ for a
# short run on the GPU (JOBS at once), the harness's learner rows on cuda and on cpu, and the
# default run (python -m trajrl) learning on cuda and on cpu, two seeds each, all four at once.
#
#   scripts/cuda_check.sh [FRAMES] [JOBS] [DEFAULT_FRAMES]
#       (defaults 4000 frames a preset, 8 presets at once, 12000 frames of the default run)
#
# Prints one table row a preset (exit code, seconds, updates, updates/s, last evaluation),
# bench_pipeline.py's learners table for each device, and bench_learning.py's row of the
# default run on each device. Logs: $LOGS (default /tmp/cuda_check).
set -uo pipefail
DEVICE=${DEVICE:-cuda}
FRAMES=${1:-4000}
JOBS=${2:-8}
DEFAULT_FRAMES=${3:-12000}
REPO=$(cd "$(dirname "$0")/.." && pwd)
LOGS=${LOGS:-/tmp/cuda_check}
PY=${PYTHON:-python3}
export PYTHONPATH="$REPO${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
mkdir -p "$LOGS"
cd "$REPO" || exit 1

"$PY" -c "import torch, torchrl; print('torch', torch.__version__, '| torchrl', torchrl.__version__, '| cuda:', \
torch.cuda.is_available() and torch.cuda.get_device_name(0))"

echo "## tests/integration/test_device.py"
timeout 400 "$PY" -m pytest -p no:cacheprovider -n 0 -q tests/integration/test_device.py 2>&1 | tail -5

run_preset() {  # one short run of preset $1 on cuda; prints its table row
    local p=$1 dir="$LOGS/$1" start end rc
    start=$(date +%s.%N)
    (cd "$LOGS" && timeout 400 "$PY" -m trajrl "experiment=$p" "device=$DEVICE" "total_frames=$FRAMES" \
        loop.eval_every_frames=0 loop.eval_episodes=3 loop.checkpoint_every_frames=0 "hydra.run.dir=$dir" \
        >"$LOGS/$p.log" 2>&1)
    rc=$?
    end=$(date +%s.%N)
    "$PY" - "$p" "$rc" "$start" "$end" "$dir/metrics.csv" <<'PYEOF'
import csv, sys
p, rc, start, end, path = sys.argv[1], int(sys.argv[2]), float(sys.argv[3]), float(sys.argv[4]), sys.argv[5]
try:
    rows = list(csv.DictReader(open(path)))
except OSError:
    rows = []
last = {k: v for row in rows for k, v in row.items() if v not in ("", None)}
updates, elapsed = float(last.get("train/updates", "nan")), float(last.get("time/elapsed_s", "nan"))
print(f"| {p} | {rc} | {end - start:.0f} | {updates:.0f} | {updates / elapsed:.0f} | {last.get('eval/return', '-')} |")
PYEOF
}
export -f run_preset
export FRAMES LOGS PY DEVICE
echo "## every preset, $FRAMES frames, device=$DEVICE ($JOBS at once)"
echo "| preset | exit | s | updates | updates per run second | last eval return |"
echo "|---|---|---|---|---|---|"
ls configs/experiment/*.yaml | xargs -n1 basename | sed 's/\.yaml$//' | xargs -P "$JOBS" -I{} bash -c 'run_preset {}'

for device in cuda cpu; do
    echo "## bench_pipeline.py learners, device=$device"
    timeout 300 "$PY" scripts/bench_pipeline.py --skip collection breakdown assembly memory fixed_frames loops \
        startup sampling --device "$device" 2>&1 | grep -v "^$" | tail -12
done

echo "## the default run, $DEFAULT_FRAMES frames, seeds 0 1, on cuda and on cpu (all four at once)"
for device in cuda cpu; do
    timeout 600 "$PY" scripts/bench_learning.py --presets default --seeds 0 1 --jobs 2 --final-episodes 20 \
        --out "$LOGS/default_$device" "device=$device" "total_frames=$DEFAULT_FRAMES" >"$LOGS/default_$device.log" 2>&1 &
done
wait
for device in cuda cpu; do echo "device=$device"; grep -m1 -E "^\| default " "$LOGS/default_$device.log"; done

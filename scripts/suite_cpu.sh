#!/usr/bin/env bash
# The test suite's CPU time and wall-clock, as notebook/development-history.md quotes them:
#   scripts/suite_cpu.sh <a fresh clone, its .venv made by `make install-test`> <label>
# runs `CI=true make test < /dev/null` there, alone on the machine, and prints its exit code,
# the CPU time of every process it started (a cpuacct cgroup holds `make test`: fork servers
# and their workers count, whoever their parent; needs root and cgroup v1's cpuacct), the
# machine's CPU time over the run (/proc/stat), its wall-clock and pytest's count, and the machine's speed
# before and after it: the CPU seconds of a fixed Python loop (10 million additions, the median of 3).
# The host's speed varies within an evening by more than the suite's margin, in CPU seconds too (the same
# suite: 594 s of user CPU at 22:36, 789 s at 23:23; this loop 0.29-0.55 s within a minute at 23:40).
# The whole output of `make test` (with /usr/bin/time -v's): <label>.log in this directory.
set -uo pipefail
dir=$1 label=$2
log=$PWD/$label.log
cgroup=/sys/fs/cgroup/cpuacct/trajrl_suite_$label
loop_s() { python3 -c 'import statistics, time
def once():
    t, s = time.process_time(), 0
    for i in range(10**7):
        s += i
    return time.process_time() - t
print(f"{statistics.median(once() for _ in range(3)):.2f}")'; }
machine_ticks() { awk '/^cpu /{print $2 + $3 + $4 + $7 + $8 + $9}' /proc/stat; }
cgroup_ns() { cat "$cgroup/cpuacct.usage" 2>/dev/null || echo 0; }
mkdir -p "$cgroup" 2>/dev/null || echo "no cpuacct cgroup here: the machine's CPU time only" >&2
speed0=$(loop_s)
m0=$(machine_ticks) c0=$(cgroup_ns) t0=$(date +%s.%N)
(cd "$dir" && bash -c "echo \$\$ > $cgroup/cgroup.procs 2>/dev/null; CI=true exec /usr/bin/time -v make test < /dev/null") > "$log" 2>&1
rc=$?
sleep 3  # what the suite started ends
m1=$(machine_ticks) c1=$(cgroup_ns) t1=$(date +%s.%N)
speed1=$(loop_s)
counts=$(grep -E '[0-9]+ passed' "$log" | tail -n 1 | tr -d '=')
python3 -c "print('$label rc=$rc cgroup_cpu=%.1fs machine_cpu=%.1fs wall=%.1fs ($counts) loop_before=${speed0}s loop_after=${speed1}s' % (($c1 - $c0) / 1e9, ($m1 - $m0) / $(getconf CLK_TCK), $t1 - $t0))"

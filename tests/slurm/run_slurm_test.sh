#!/bin/bash
# The Slurm fan-out tested for real: installs Debian's slurm-wlm and munge if missing, starts munged, slurmctld and
# slurmd for one node on this machine (state under a temporary folder), submits examples/slurm/submit.sh (a 3-task
# array of `kvconf model` on the llama2-tiny fixture, then the merge job), waits, and checks the merged records and
# report against a single-process run of the same options. Stops the daemons it started. docs/SLURM.md.
# Usage: run_slurm_test.sh KVCONF_BINARY SOURCE_DIR WORK_DIR
# Exit 0 pass, 1 fail, 77 skipped: only with KVCONF_SLURM_TEST=skip and Slurm neither installed nor installable.
set -euo pipefail
KVCONF=$(realpath "$1"); SRC=$(realpath "$2"); WORK=$3
TASKS=3
ARGS="--model fixture:llama2-tiny --profile fp16-eager --n 3 --seeds 0 --strategies greedy,topk --max-new-tokens 8"
start=$(date +%s)
export PATH=$PATH:/usr/sbin:/sbin  # slurmctld, slurmd and munged live in /usr/sbin
say() { echo "slurm-test: $*"; }
fail() { echo "slurm-test: FAIL: $*" >&2; exit 1; }

# ---- 1. slurm-wlm and munge (root, or sudo without a password). ----
need=(slurmctld slurmd sbatch squeue scontrol munged mungekey)
missing() { for c in "${need[@]}"; do command -v "$c" >/dev/null || return 0; done; return 1; }
if missing; then
  if [ "$(id -u)" = 0 ]; then SUDO=(); elif sudo -n true 2>/dev/null; then SUDO=(sudo -n); else SUDO=none; fi
  if [ "${SUDO[*]}" = none ] || ! { "${SUDO[@]}" apt-get update -qq &&
       DEBIAN_FRONTEND=noninteractive "${SUDO[@]}" apt-get install -y -qq --no-install-recommends slurm-wlm munge \
         >"$WORK.apt.log" 2>&1; }; then
    msg="cannot install slurm-wlm and munge (need root or passwordless sudo, and Debian's package archive"
    if [ "${SUDO[*]}" = none ]; then msg+="; not root and sudo -n fails)"; else msg+="; apt log: $WORK.apt.log)"; fi
    if [ "${KVCONF_SLURM_TEST:-}" = skip ]; then say "SKIP: $msg (KVCONF_SLURM_TEST=skip)"; exit 77; fi
    fail "$msg; set KVCONF_SLURM_TEST=skip to skip this test where Slurm cannot be had"
  fi
  say "installed slurm-wlm and munge in $(( $(date +%s) - start )) s"
fi
missing && fail "after installing, still missing one of: ${need[*]}"
say "$(slurmctld -V), $(munged -V 2>&1 | head -1)"

# ---- 2. A one-node cluster under WORK. ----
rm -rf "$WORK"; mkdir -p "$WORK"; WORK=$(realpath "$WORK"); chmod 755 "$WORK"
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  [ -f "$WORK/munge/pid" ] && kill "$(cat "$WORK/munge/pid")" 2>/dev/null || true
}
trap cleanup EXIT
mkdir -p "$WORK/munge" "$WORK/ctld" "$WORK/spool" "$WORK/log"; chmod 755 "$WORK/munge"
mungekey --create --keyfile="$WORK/munge/munge.key"
munged --force --socket="$WORK/munge/sock" --key-file="$WORK/munge/munge.key" --log-file="$WORK/munge/log" \
  --pid-file="$WORK/munge/pid" --seed-file="$WORK/munge/seed" || fail "munged did not start: $(tail -3 "$WORK/munge/log")"
node=$(hostname -s)
mem=$(( $(awk '/MemTotal/ {print int($2/1024)}' /proc/meminfo) / 2 ))
port=$(( 20000 + ($$ % 5000) * 2 ))  # two ports per test process, so two runs on one machine do not collide
cat >"$WORK/slurm.conf" <<CONF
ClusterName=kvconftest
SlurmctldHost=$node(127.0.0.1)
SlurmUser=$(id -un)
SlurmdUser=root
SlurmctldPort=$port
SlurmdPort=$((port + 1))
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$WORK/munge/sock
StateSaveLocation=$WORK/ctld
SlurmdSpoolDir=$WORK/spool
SlurmctldPidFile=$WORK/ctld.pid
SlurmdPidFile=$WORK/slurmd.pid
SlurmctldLogFile=$WORK/log/slurmctld.log
SlurmdLogFile=$WORK/log/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
MpiDefault=none
ReturnToService=2
MinJobAge=600
NodeName=$node NodeAddr=127.0.0.1 CPUs=2 RealMemory=$mem State=UNKNOWN
PartitionName=debug Nodes=$node Default=YES MaxTime=INFINITE State=UP
CONF
export SLURM_CONF=$WORK/slurm.conf
slurmctld -D -i -f "$SLURM_CONF" >"$WORK/log/slurmctld.out" 2>&1 & pids+=($!)
slurmd -D -N "$node" -f "$SLURM_CONF" >"$WORK/log/slurmd.out" 2>&1 & pids+=($!)
for i in $(seq 60); do
  state=$(sinfo -h -N -o %T 2>/dev/null | head -1 || true)
  [ "$state" = idle ] && break
  sleep 1
done
[ "$state" = idle ] || fail "the node is not idle after 60 s (state '$state'); logs: $(tail -5 "$WORK/log/slurmctld.log" "$WORK/log/slurmd.log")"
say "slurmctld and slurmd up (node $node, ports $port/$((port + 1))) at $(( $(date +%s) - start )) s"

# ---- 3. The example array + merge, as a user submits them. ----
export RUN_DIR=$WORK/run KVCONF KVCONF_MODEL_ARGS=$ARGS
ids=$("$SRC/examples/slurm/submit.sh" --array=0-$((TASKS - 1)) --time=10:00)
say "submitted: $ids"
array=$(echo "$ids" | awk '{print $2}'); merge=$(echo "$ids" | awk '{print $4}')
deadline=$(( $(date +%s) + 300 ))
while squeue -h -j "$array,$merge" 2>/dev/null | grep -q .; do
  [ "$(date +%s)" -lt "$deadline" ] || { squeue; fail "jobs not done after 300 s"; }
  sleep 2
done
for j in $array $merge; do
  scontrol show job "$j" | grep -o 'JobId=[0-9]* \|ArrayTaskId=[0-9]*\|JobState=[A-Z_]*\|ExitCode=[0-9:]*' | paste -sd' '
done
states=$(for j in $array $merge; do scontrol show job "$j"; done | grep -o 'JobState=[A-Z_]*')
[ "$(echo "$states" | grep -c COMPLETED)" = $((TASKS + 1)) ] && ! echo "$states" | grep -qv COMPLETED ||
  fail "not every task and the merge COMPLETED ($(echo $states)); logs: $(tail -n 20 "$RUN_DIR"/*.log)"
say "array and merge done at $(( $(date +%s) - start )) s"

# ---- 4. The merge equals one process's run. ----
for i in $(seq 0 $((TASKS - 1))); do
  grep -q "shard $i/$TASKS from SLURM_ARRAY_TASK_ID=$i of SLURM_ARRAY_TASK_COUNT=$TASKS" "$RUN_DIR"/kvconf-shard-*_"$i".log ||
    fail "task $i's log does not name shard $i/$TASKS from the Slurm variables"
done
grep -q "3 of 3 shards, 6 of 6 planned pairs, each once" "$RUN_DIR"/kvconf-merge-*.log ||
  fail "the merge log has no complete coverage line: $(cat "$RUN_DIR"/kvconf-merge-*.log)"
# shellcheck disable=SC2086
env -u SLURM_ARRAY_TASK_ID -u SLURM_ARRAY_TASK_COUNT "$KVCONF" model $ARGS --out "$WORK/single" >"$WORK/single.log"
"$KVCONF" report --in "$WORK/single" --out "$WORK/single/report" >/dev/null
python3 - "$RUN_DIR" "$WORK/single" <<'PY'
# Records (wall time aside) and the report's pairs and verdicts: the 3 merged shards vs the one-process run.
import glob, json, sys
run, single = sys.argv[1], sys.argv[2]
def records(dirs):
    out = {}
    for d in dirs:
        for line in open(d + "/pairs.jsonl"):
            if line.strip():
                r = json.loads(line); r.pop("seconds", None)
                key = "|".join([r["model"], r["profile"], r["strategy"], str(r["seed"]), r["prompt_id"]])
                assert key not in out, "pair %s twice" % key
                out[key] = r
    return out
a, b = records(sorted(glob.glob(run + "/shard-*"))), records([single])
assert len(b) == 6, "the single run has %d pairs, expected 6" % len(b)
assert a.keys() == b.keys(), "pair keys differ: %s" % sorted(set(a) ^ set(b))
for k in b:
    assert a[k] == b[k], "pair %s differs:\n%s\n%s" % (k, a[k], b[k])
def verdicts(f):
    j = json.load(open(f))
    return sorted(json.dumps({k: v for k, v in x.items() if k != "seconds"}, sort_keys=True) for x in j["verdicts"])
ra, rb = verdicts(run + "/report/report.json"), verdicts(single + "/report/report.json")
assert ra == rb, "the merged report's verdicts differ from the single run's"
print("slurm-test: %d pairs, tokens and metrics of the merged shards equal the single-process run's; %d verdicts equal"
      % (len(b), len(rb)))
PY
say "PASS in $(( $(date +%s) - start )) s"

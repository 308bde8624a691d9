#!/bin/bash
# Submits kvconf's protocol to Slurm: the shard array (kvconf_array.sbatch), then the merge (kvconf_merge.sbatch)
# once every task has ended, whatever its exit status (a task whose rules failed exits 1 but its records count).
# Usage: RUN_DIR=runs/7b [KVCONF=/opt/kvconf/bin/kvconf] [KVCONF_MODEL_ARGS="..."] submit.sh [extra sbatch options]
# Prints the two job ids. The report lands in $RUN_DIR/report (report.html, report.json, junit.xml).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
: "${RUN_DIR:?set RUN_DIR, the folder for the shards and the report (on a file system every node sees)}"
mkdir -p "$RUN_DIR"
RUN_DIR=$(cd "$RUN_DIR" && pwd)
export RUN_DIR
array=$(sbatch --parsable --export=ALL --chdir="$RUN_DIR" "$@" "$here/kvconf_array.sbatch")
array=${array%%;*}  # "jobid;cluster" on multi-cluster set-ups
merge=$(sbatch --parsable --export=ALL --chdir="$RUN_DIR" --dependency="afterany:$array" --kill-on-invalid-dep=yes \
        "$here/kvconf_merge.sbatch")
echo "array $array merge ${merge%%;*}"

#!/usr/bin/env bash
# The prepared GPU run (docs/GPU.md "Running on a lent GPU"): on a machine with an NVIDIA GPU, configure and build the
# nightly-gpu preset, then run stages in priority order under one time budget, writing a summary and logs to an
# output folder. A lent GPU comes for minutes, so what has never run on a device goes first.
#
#   scripts/gpu_run.sh --prepare                       # here, with network: .gpu/ (Debian .debs, the shared data)
#   scripts/gpu_run.sh --out DIR --budget S STAGE...   # there: stages in the order given
#   scripts/gpu_run.sh --plan [--build-dir DIR]        # each stage's command; ctest stages must select tests
#
# Stages: build, new, fast, golden, pybench, decode, slow (all: every one, in that order; 9 files, one more than a
# device call brings back: split them over two calls, docs/GPU.md). ctest runs each test selection with JUnit to
# DIR/junit-<stage>.xml; DIR/summary.txt has one line per stage (rc, seconds, ctest's count).
set -uo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
BUILD=$ROOT/build-nightly-gpu
OUT=${OUT:-$ROOT/gpu-out}
BUDGET=570     # seconds for everything this call runs (a device call may run 600)
PLAN=0
PREPARE=0
STAGES=()
ALL=(build new fast golden pybench decode slow)

# Tests that are new or changed since the last GPU run recorded in docs/GPU.md (the fourth, tree 111cafe): the Python
# CUDA path, which that run left unfinished (one process then; now one CTest case per SDPA backend and one for the
# rest). Update it when docs/GPU.md records a run.
NEW_RE='^Python/cuda_'
# The slow cases the third run did not finish (the fourth ran no slow case), first among the slow ones.
UNFINISHED_RE='^Cuda/Fp32Conformance.*(mistral_tiny__cuda_fp32__topp|gemma2_tiny).*__Slow'
UNFINISHED_RE+='|^Cuda/InvariantConformance.*__Slow'

usage() { sed -n '2,12p' "$0" | sed 's/^# \{0,1\}//'; exit 2; }
while (($#)); do
  case $1 in
    --out) OUT=$2; shift 2 ;;
    --budget) BUDGET=$2; shift 2 ;;
    --build-dir) BUILD=$2; shift 2 ;;
    --plan) PLAN=1; shift ;;
    --prepare) PREPARE=1; shift ;;
    all) STAGES+=("${ALL[@]}"); shift ;;
    build|new|fast|golden|pybench|decode|slow) STAGES+=("$1"); shift ;;
    -h|--help) usage ;;
    *) echo "gpu_run.sh: unknown argument '$1' (expected a stage: ${ALL[*]} or all, or an option)" >&2; exit 2 ;;
  esac
done
[[ $BUDGET =~ ^[0-9]+$ ]] || { echo "gpu_run.sh: --budget '$BUDGET': expected whole seconds" >&2; exit 2; }

# --prepare (here): what the device machine cannot fetch. The .debs are README's "Building where the Debian dev
# packages cannot be installed" list; the shared data is the part the suites read (models, tokenizers, data).
if ((PREPARE)); then
  mkdir -p "$ROOT/.gpu/debs" "$ROOT/.gpu/shared"
  (cd "$ROOT/.gpu/debs" && apt-get download libgtest-dev libmpfr-dev libmpfr6 libgmp-dev libgmp10 libgmpxx4ldbl \
    libboost-dev libboost1.74-dev nlohmann-json3-dev libsentencepiece-dev libsentencepiece0 libcli11-dev libfmt-dev \
    libfmt9 libbenchmark-dev libbenchmark1debian libdlpack-dev pkgconf-bin libpkgconf3) || exit 1
  for d in models tokenizers data; do cp -r "$ROOT/../shared/$d" "$ROOT/.gpu/shared/"; done
  # the device's copy of the tree has no .git: the commit it is, said here
  git -C "$ROOT" describe --always --dirty >"$ROOT/.gpu/tree"
  du -sh "$ROOT/.gpu"
  echo "carry .gpu; the tree and .gpu together must stay under the device tool's 64 MiB"
  exit 0
fi

# Each stage: its command (ctest stages as a selection, so --plan can count them) and its own time limit.
ctest_sel() {  # the ctest selection of a test stage
  case $1 in
    new) echo "-L ^gpu\$ -LE ^slow\$ -R $NEW_RE" ;;
    fast) echo "-L ^gpu\$ -LE ^slow\$ -E $NEW_RE" ;;
    slow-first) echo "-L ^gpu\$ -L ^slow\$ -R $UNFINISHED_RE" ;;
    slow) echo "-L ^gpu\$ -L ^slow\$ -E $UNFINISHED_RE" ;;
  esac
}
limit_of() {
  case $1 in build) echo 300 ;; new) echo 240 ;; fast) echo 300 ;; golden) echo 120 ;; pybench) echo 90 ;;
    decode) echo 240 ;; slow | slow-first) echo 600 ;; esac
}

if ((PLAN)); then
  ((${#STAGES[@]})) || STAGES=("${ALL[@]}")
  bad=0
  for s in "${STAGES[@]}"; do
    [[ $s == slow ]] && STAGES+=(slow-first)
  done
  for s in "${STAGES[@]}"; do
    sel=$(ctest_sel "$s")
    if [[ -n $sel ]]; then
      # shellcheck disable=SC2086  # the selection is words
      n=$(ctest --test-dir "$BUILD" -N $sel | sed -n 's/^Total Tests: //p')
      echo "$s: ctest $sel -> ${n:-0} tests (limit $(limit_of "$s") s)"
      [[ ${n:-0} -gt 0 ]] || { echo "gpu_run.sh: stage $s selects no test in $BUILD" >&2; bad=1; }
    else
      echo "$s: (limit $(limit_of "$s") s)"
    fi
  done
  exit $bad
fi

((${#STAGES[@]})) || usage
mkdir -p "$OUT" "$BUILD"
OUT=$(cd "$OUT" && pwd) BUILD=$(cd "$BUILD" && pwd)  # absolute: the configure step runs from the source root
START=$SECONDS
SUMMARY=$OUT/summary.txt
left() { echo $((BUDGET - (SECONDS - START))); }
note() { echo "$*" | tee -a "$SUMMARY"; }
tree=$(git -C "$ROOT" describe --always --dirty 2>/dev/null || cat "$ROOT/.gpu/tree" 2>/dev/null || echo unknown)
note "gpu_run.sh $(date -u +%FT%TZ) tree $tree budget ${BUDGET}s stages ${STAGES[*]}"
{
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>&1 | sed 's/^/gpu: /'
  nvcc=$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)
  echo "nvcc: $("$nvcc" --version 2>&1 | tail -1); $(cmake --version | head -1)"
  py='import sys, torch; print(sys.executable, "torch", torch.__version__)'
  echo "python: $("${KVCONF_PYTHON:-python3}" -c "$py" 2>&1)"
} | tee -a "$SUMMARY"

# The prefix of carried .debs (README), once per machine, outside the tree.
P=/tmp/kvconf-prefix
if [[ -d $ROOT/.gpu/debs && ! -d $P ]]; then  # unpacked aside and renamed: an interrupted unpack is redone
  shopt -s nullglob
  debs=("$ROOT"/.gpu/debs/*.deb)
  shopt -u nullglob
  unpacked=${#debs[@]}
  rm -rf "$P.part" && mkdir -p "$P.part"
  for d in "${debs[@]}"; do dpkg -x "$d" "$P.part" || unpacked=0; done
  if ((unpacked)); then mv "$P.part" "$P"; else note "setup: .gpu/debs holds no .deb, or one did not unpack"; fi
fi
if [[ -d $P ]]; then
  export LD_LIBRARY_PATH=$P/usr/lib/x86_64-linux-gnu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
  export PKG_CONFIG_LIBDIR=$P/usr/lib/x86_64-linux-gnu/pkgconfig PKG_CONFIG_SYSROOT_DIR=$P
fi
export CUBLAS_WORKSPACE_CONFIG=:4096:8  # as the nightly-gpu test preset
JOBS=$(nproc)

run_stage() {  # name seconds command...: appends to $OUT/$LOG, notes rc, seconds and ctest's count line
  local s=$1 t=$2; shift 2
  local t0=$SECONDS rc before
  before=0
  [[ -f $OUT/$LOG ]] && before=$(wc -l <"$OUT/$LOG")
  timeout -k 10 "$t" "$@" >>"$OUT/$LOG" 2>&1
  rc=$?
  local count
  count=$(tail -n +"$((before + 1))" "$OUT/$LOG" | grep -E '^[0-9]+% tests passed' | tail -1)
  note "$s: rc=$rc $((SECONDS - t0))s${count:+ ($count)}$( ((rc == 124 || rc == 137)) && echo ' TIME LIMIT')"
  # what needs reading: ctest's failures and known findings, a build's first errors
  tail -n +"$((before + 1))" "$OUT/$LOG" |
    grep -E '\*\*\*(Failed|Timeout|Exception)|\((Failed|Timeout)\)|Not Run|known finding|error:' | head -30 |
    sed 's/^/  /' | tee -a "$SUMMARY"
}
ctest_stage() {  # name seconds selection...: one ctest run, JUnit (passed output kept to 64 KiB) to junit-<name>.xml
  local s=$1 t=$2; shift 2
  LOG=tests.log
  echo "=== $s: ctest $*" >>"$OUT/tests.log"
  # --stop-time ends the run itself 15 s before the stage's limit, so ctest still writes its JUnit and its count (a
  # ctest killed by `timeout` writes neither); `timeout` stays as the backstop.
  run_stage "$s" "$t" ctest --test-dir "$BUILD" "$@" -j "$JOBS" --timeout "$t" --output-on-failure \
    --stop-time "$(date -d "+$((t > 30 ? t - 15 : t / 2)) sec" +%H:%M:%S)" \
    --test-output-size-passed 65536 --output-junit "$OUT/junit-$s.xml"
}
stage_time() {  # the stage's own limit, cut to what is left of the budget (15 s kept for timeout's kill margin)
  local t l
  t=$(limit_of "$1") l=$(($(left) - 15))
  t=$((t < l ? t : l))
  echo $((t > 0 ? t : 0))
}

for s in "${STAGES[@]}"; do
  t=$(stage_time "$s")
  if ((t < 20)); then note "$s: not started, $(left)s of the budget left"; continue; fi
  case $s in
    new | fast)
      # shellcheck disable=SC2046  # the selection is words
      ctest_stage "$s" "$t" $(ctest_sel "$s")
      # the Python/cuda_* cases' own JUnit (their per-case properties) in one file, at once: a later stage may be cut
      # off (one file: a device call brings back 8)
      (cd "$BUILD/pytest-xml" 2>/dev/null && compgen -G 'cuda_*.xml' >/dev/null &&
        tar czf "$OUT/pytest-cuda.tgz" cuda_*.xml) ;;
    slow)  # the cases the last run did not finish first, then the rest
      # shellcheck disable=SC2046
      ctest_stage slow-first "$t" $(ctest_sel slow-first)
      t=$(stage_time slow)
      # shellcheck disable=SC2046
      ((t >= 20)) && ctest_stage slow "$t" $(ctest_sel slow) ;;
    build)
      LOG=build.log
      archs=${KVCONF_CUDA_ARCHS:-90}  # the H100/H200's sm_90 only: half the device code of the preset's 80;90
      extra=()
      [[ -d $P ]] && extra+=("-DCMAKE_PREFIX_PATH=$P/usr")
      [[ -x $P/usr/bin/pkgconf ]] && extra+=("-DPKG_CONFIG_EXECUTABLE=$P/usr/bin/pkgconf")
      [[ -d $ROOT/.gpu/shared ]] && extra+=("-DKVCONF_SHARED_DIR=$ROOT/.gpu/shared")
      (cd "$ROOT" && run_stage configure "$t" cmake --preset nightly-gpu -B "$BUILD" "${extra[@]}" \
        -DCMAKE_CUDA_ARCHITECTURES="$archs" -DKVCONF_PYTHON="${KVCONF_PYTHON:-python3}")
      # what was found: without libtorch there are no TorchCuda/ tests, without the Python package no Python/cuda
      grep -E '^-- +(CUDA|libtorch|Python package|shared data) +:' "$OUT/build.log" | tail -4 | tee -a "$SUMMARY"
      # -k: a target that fails to build (say, the Python module against the image's nanobind) stops only its tests
      t=$(stage_time build)
      if ((t < 20)); then note "build: not started, $(left)s of the budget left"; continue; fi
      run_stage build "$t" cmake --build "$BUILD" -j "$JOBS" -- -k
      for l in '^gpu$' '^slow$'; do
        note "  ctest -L $l selects $(ctest --test-dir "$BUILD" -N -L "$l" | tail -1)"
      done ;;
    golden)
      LOG=bench.txt
      # both parts: the token runs of the cuda-* profiles have never been checked on a device (53 s to write them)
      run_stage golden "$t" "$BUILD/tools/kvconf" golden check --device h100 --part all ;;
    pybench)
      LOG=bench.txt
      run_stage pybench "$t" env PYTHONPATH="$BUILD/python" "${KVCONF_PYTHON:-python3}" \
        "$ROOT/bench/python/attention_overhead.py" --suites "$BUILD/conformance/suites" --device cuda:0 --repeat 3 ;;
    decode)  # a random llama2-7b checkpoint cut to 8 layers (3.6 GB); cache-ON at prefix 2048, then the recompute
      LOG=bench.txt
      ckpt=/tmp/kvconf-llama2-7b-8layers
      [[ -f $ckpt/config.json ]] || run_stage checkpoint "$t" "$BUILD/bench/kvconf_make_random_checkpoint" \
        --arch llama2-7b --layers 8 --seed 1 --threads "$JOBS" --out "$ckpt"
      for b in cache_on cache_off_recompute; do
        t=$(stage_time decode)
        ((t >= 20)) && run_stage "decode-$b" "$t" "$BUILD/bench/kvconf_bench_decode" --model="$ckpt" \
          --profile=cuda-fp16 --prefix=2048 --benchmark_filter="decode/$b/" --benchmark_min_time=0.01
      done ;;
  esac
done
n_files=$(find "$OUT" -maxdepth 1 -type f | wc -l)
too_many=$( ((n_files > 8)) && echo ' (a device call brings back 8: split the stages over two calls, docs/GPU.md)')
note "done in $((SECONDS - START))s; $n_files files in $OUT$too_many"

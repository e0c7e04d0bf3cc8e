#!/usr/bin/env bash
# Four GPUs: perfconsole's data-parallel step against the independent script (scripts/independent_ddp.py), their
# processes interleaved, at 1, 2 and 4 GPUs; the candidate programs for >= 90 % weak scaling; the scaling curve
# (`perfconsole scale`); an nsys capture over all ranks of the best rung; small captures for the timeline's fixtures;
# the exchange's cost (`exchange`, `best2`); the best rung under the torch profiler split by scripts/comm_bound.py
# (`capture2`), fewer NCCL channels (`channels`), FSDP2 on bf16 weights (`fsdp`), each
# bucket's optimizer step in its all-reduce's callback (`hookopt`), compiled autograd with DDP's all-reduces in the
# backward's graph (`autograd`), its buckets at 25 and 400 MB (`cabuckets`), inductor's reordering of its
# collectives (`careorder`; `capture2` with CAPFLAGS="--optimize-ddp python_reducer" traces it), xl's DDP defaults in
# three pairs of processes (`xlpairs`), the script's collector as perfconsole's worker sets it (`xlgc`), the
# data-parallel ladder at 4 GPUs over calls (`ladder4`), ZeRO-1 (`zero`), ZeRO-2 in DDP's comm hook (`shard`), NCCL's and CUDA's
# settings for the all-reduces beside the backward (`ncclenv`), the one-GPU pairs of the truth tables
# on one GPU (`ones`, with CUDA_VISIBLE_DEVICES naming it), and the best rung's (`onesbest`). 2.7B bf16 train, sdpa, ctx 512, batch 4
# per rank unless SIZE says. A device call is at most 600 s: SECTIONS picks what runs.
# From the repository root: source scripts/device_env.sh && SECTIONS="truth" bash scripts/gpu_four.sh
# Not yet run to the end on 4x H100 (docs/results/four_gpus_truth_h100.md): "capture fixtures priority memtrace",
# and "curve" (perfconsole's `scale`) after the exchange stopped holding the ranks in lockstep.
set -uo pipefail
# Outside $OUT: a later call on the same warm machine finds the data folder and the compile caches of the one before.
D=${D:-/tmp/four}
mkdir -p "$D"
export PERFCONSOLE_DATA_DIR="$D/data"
# One compile cache for every process of the call: a program compiled once compiles from the cache after
# (the compile is no step's time either way; this only shortens the call).
export TORCHINDUCTOR_CACHE_DIR="$D/inductor"
SIZE=${SIZE:-2.7B}
SECTIONS=${SECTIONS:-truth}
T0=$(date +%s)
want() { [[ " $SECTIONS " == *" $1 "* ]]; }
before() { [ $(( $(date +%s) - T0 )) -lt "$1" ]; }  # whether the call is still under N s: the last parts are optional
# A call brings back at most eight files and nothing once it runs past its limit: after every part the results so
# far are packed into one file, so a call cut short still returns what it measured.
pack() { [ -n "${OUT:-}" ] && tar czf "$OUT/four.tgz.part" -C "$D" --exclude=./inductor --exclude=./data \
    --exclude='*/torchrun' --exclude='*.nsys-rep' --exclude='*.qdstrm' --exclude='./cap_*/*.sqlite' --exclude='./fx_*/*' --exclude='./fixtures/*.nsys-rep' . 2>/dev/null && mv "$OUT/four.tgz.part" "$OUT/four.tgz"; }
{ nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.max.sm --format=csv; nvidia-smi topo -m;
  python3 -c "import torch; print('torch', torch.__version__, 'nccl', torch.cuda.nccl.version())"; git rev-parse --short HEAD; } > "$D/environment.txt" 2>&1
COMMON=(--size "$SIZE" --ctx 512 --batch 4 --warmup 3 --steps 10)
indep() {  # name nproc cap flags...
    local name=$1 n=$2 cap=$3; shift 3
    echo "$name: torchrun --standalone --nproc-per-node $n scripts/independent_ddp.py ${COMMON[*]} $*" >> "$D/commands.txt"
    timeout -k 10 "$cap" torchrun --standalone --nproc-per-node "$n" scripts/independent_ddp.py "${COMMON[@]}" "$@" \
        > "$D/$name.json" 2> "$D/$name.log"
    echo "$name exit $? at $(( $(date +%s) - T0 )) s"
    pack
}
pc() {  # name cap command args...
    local name=$1 cap=$2 cmd=$3; shift 3
    echo "$name: perfconsole $cmd ${COMMON[*]} --precision bf16 --attention sdpa --device cuda $*" >> "$D/commands.txt"
    timeout -s INT -k 20 "$cap" python3 -m perfconsole.tui.main "$cmd" "${COMMON[@]}" --precision bf16 \
        --attention sdpa --device cuda --force --json --save "$D/$name.json" "$@" > /dev/null 2> "$D/$name.log"
    echo "$name exit $? at $(( $(date +%s) - T0 )) s"
    pack
}
if want truth; then  # DDP's defaults, eager: A B A B at 4 GPUs, then A B at 2 and at 1; each pair only where the
    # call has time for it (TRUTH_END: the second by which a pair must have started, 420 unless said)
    e=${TRUTH_END:-420}
    before "$e" && { indep ind_ddp_4a 4 90; pc pc_ddp_4a 150 run --mode train --nproc 4 --parallel ddp; }
    before "$e" && { indep ind_ddp_4b 4 90; pc pc_ddp_4b 150 run --mode train --nproc 4 --parallel ddp; }
    before "$e" && { pc pc_ddp_2 120 run --mode train --nproc 2 --parallel ddp; indep ind_ddp_2 2 90; }
    before $(( e + 60 )) && { indep ind_plain_1 1 90 --no-wrap; pc pc_plain_1 90 run --mode train; }
fi
if want ones; then  # the one-GPU rows of the truth tables, in pairs (a call's spare GPU): xl three times, then 2.7B
    # eager twice, each pair only where it can end before ONES_END s (500 unless said)
    KEPT=("${COMMON[@]}"); COMMON=(--size xl --ctx 512 --batch 4 --warmup 3 --steps 10)
    for i in 1 2 3; do
        before $(( ${ONES_END:-500} - 140 )) || break
        indep "ind_xl1_$i" 1 70 --no-wrap
        pc "pc_xl1_$i" 80 run --mode train
    done
    COMMON=("${KEPT[@]}")
    for i in 1 2; do
        before $(( ${ONES_END:-500} - 160 )) || break
        indep "ind_plain1_$i" 1 80 --no-wrap
        pc "pc_plain1_$i" 80 run --mode train
    done
fi
BEST=(--compile --bf16-weights --grad-as-bucket-view)
if want onesbest; then  # the one-GPU pairs of the best rung (compiled, bf16 weights) at SIZE, three in turn, for a
    # GPU of its own each (CUDA_VISIBLE_DEVICES) as `ones` is run: host-paced at xl, where the truth is the median
    # of many processes and each record's `host` (and the script's thread_cpu_share) says what the host gave it
    for i in 1 2 3; do
        before $(( ${ONES_END:-500} - 120 )) || break
        indep "ind_best1_$i" 1 90 --no-wrap "${BEST[@]}"
        pc "pc_best1_$i" 100 run --mode train --compile --weights bf16
    done
fi
if want candidates; then  # the independent script at 4 GPUs: which compiled DDP program scales best
    indep ind_best_1 1 160 --no-wrap "${BEST[@]}"
    indep ind_b100_4 4 170 "${BEST[@]}" --bucket-mb 100
fi
if want candidates2; then
    indep ind_b400_4 4 150 "${BEST[@]}" --bucket-mb 400
    indep ind_whole_4 4 150 "${BEST[@]}" --bucket-mb 100 --optimize-ddp no_optimization
fi
PCBEST=(--compile --weights bf16 --grad-as-bucket-view --bucket-mb 100 --parallel ddp)
if want curve; then  # the ladder's best rung (compile) as a curve, the independent script beside it, interleaved
    indep ind_curve_4 4 150 "${BEST[@]}" --bucket-mb 100
    echo "scale: perfconsole scale ${COMMON[*]} --precision bf16 --mode train --attention sdpa --nproc 1,2,4 ${PCBEST[*]}" >> "$D/commands.txt"
    timeout -s INT -k 20 330 python3 -m perfconsole.tui.main scale "${COMMON[@]}" --precision bf16 --mode train \
        --attention sdpa --device cuda --nproc 1,2,4 "${PCBEST[@]}" --force --save "$D/scale_best.json" \
        > "$D/scale_best.txt" 2> "$D/scale_best.log"
    echo "scale exit $? at $(( $(date +%s) - T0 )) s"
    pack
    python3 -m perfconsole.tui.main export "$D/scale_best.json" --format md > "$D/scale_best.md" 2>&1 && cat "$D/scale_best.md"
    indep ind_curve_2 2 110 "${BEST[@]}" --bucket-mb 100
    indep ind_curve_1 1 100 --no-wrap "${BEST[@]}"
fi
if want xl; then  # DDP's defaults at xl, whose fp32 state leaves room on an 80 GB card (2.7B's leaves the independent none)
    KEPT=("${COMMON[@]}"); COMMON=(--size xl --ctx 512 --batch 4 --warmup 3 --steps 10)
    pc pc_xl_4 120 run --mode train --nproc 4 --parallel ddp
    indep ind_xl_4 4 90
    indep ind_xl_2 2 80
    pc pc_xl_2 100 run --mode train --nproc 2 --parallel ddp
    pc pc_xl_1 80 run --mode train
    indep ind_xl_1 1 70 --no-wrap
    COMMON=("${KEPT[@]}")
fi
if want xlpairs; then  # xl with DDP's defaults at 4 GPUs, three pairs in turn (A B A B A B): host-paced processes
    # spread past 3 % one by one, so the truth is the median of each program's processes
    KEPT=("${COMMON[@]}"); COMMON=(--size xl --ctx 512 --batch 4 --warmup 3 --steps 10)
    for i in 1 2 3; do
        before 400 || break
        indep "ind_xlp_4_$i" 4 80
        pc "pc_xlp_4_$i" 110 run --mode train --nproc 4 --parallel ddp
    done
    COMMON=("${KEPT[@]}")
fi
if want xlgc; then  # xl eager at 4 GPUs: the script with Python's collector as it comes and as perfconsole's worker
    # sets it (--gc-settle), and perfconsole's job, in turn, twice: does the collector explain the 13.9 % between them
    # (docs/results/four_gpus_curve_h200.md)?
    KEPT=("${COMMON[@]}"); COMMON=(--size xl --ctx 512 --batch 4 --warmup 3 --steps 10)
    for i in 1 2; do
        before 420 || break
        indep "ind_xlg_4_$i" 4 80
        indep "ind_xlgs_4_$i" 4 80 --gc-settle
        pc "pc_xlg_4_$i" 110 run --mode train --nproc 4 --parallel ddp
    done
    # the one-GPU step of both on this machine: how much of a rank's host time comes with four ranks
    before 480 && indep ind_xlg_1 1 70 --no-wrap
    before 520 && pc pc_xlg_1 80 run --mode train
    COMMON=("${KEPT[@]}")
fi
if want ladder4; then  # the data-parallel ladder at 4 GPUs (2.7B bf16 train): each rung's step, weak scaling against its
    # one-GPU program, exposed communication and peak memory; no profile of the best rung (the call's time). Its
    # rungs take longer than one call: the ladder is saved after every rung, and a later call on the same warm
    # machine (the same D) goes on with it (--resume: the rungs never started), LADDER_CAP seconds a call.
    # LADDER4_RUNGS: the rungs, where not the ladder's default ones (e.g. with the opt-in compiled-autograd)
    L=(ladder "${COMMON[@]}" --precision bf16 --device cuda --nproc 4 --no-profile
       ${LADDER4_RUNGS:+--rungs "$LADDER4_RUNGS"})
    [ -f "$D/ladder4.json" ] && L=(ladder --resume "$D/ladder4.json")
    n=$(ls "$D"/ladder4*.txt 2>/dev/null | wc -l)
    echo "ladder4 ($n): perfconsole ${L[*]}" >> "$D/commands.txt"
    timeout -s INT -k 20 "${LADDER_CAP:-560}" python3 -m perfconsole.tui.main "${L[@]}" --save "$D/ladder4.json" \
        > "$D/ladder4_$n.txt" 2> "$D/ladder4_$n.log"
    echo "ladder4 ($n) exit $? at $(( $(date +%s) - T0 )) s"
    pack
fi
if want exchange; then  # the per-step exchange without lockstep: perfconsole's job against the script, with and without
    KEPT=("${COMMON[@]}"); COMMON=(--size xl --ctx 512 --batch 4 --warmup 3 --steps 10)  # a blocking one, xl eager first
    indep ind_xl4_a 4 80
    pc pc_xl4_fix 110 run --mode train --nproc 4 --parallel ddp
    indep ind_xl4_ex 4 80 --exchange
    COMMON=("${KEPT[@]}")
    pc pc_best4_fix 190 run --mode train --nproc 4 "${PCBEST[@]}"
    indep ind_best4_b 4 130 "${BEST[@]}" --bucket-mb 100
fi
if want best2; then  # the best rung at 2 GPUs, both programs, after "exchange" (its compile caches warm)
    pc pc_best2_fix 100 run --mode train --nproc 2 "${PCBEST[@]}"
    indep ind_best2_b 2 70 "${BEST[@]}" --bucket-mb 100
fi
if want memtrace; then  # where the independent script's DDP-defaults step at 2.7B runs out of memory, and perfconsole's does not
    indep ind_mem_2 2 70 --memory-trace
fi
if want priority && before 440; then  # NCCL's streams at high priority: the rung after compile, both programs
    indep ind_prio_4 4 80 "${BEST[@]}" --bucket-mb 100 --nccl-high-priority
    before 480 && pc pc_prio_4 100 run --mode train --nproc 4 "${PCBEST[@]}" --nccl-priority
fi
if want capture; then  # the best rung's job under nsys, one capture a rank: what bounds its scaling
    pc cap_best_4 200 run --mode train --nproc 4 "${PCBEST[@]}" --profile nsys --force
fi
if want capture2; then  # the best rung's job under the torch profiler, a trace a rank, and what bounds its step
    touch "$D/.cap2_start"
    # shellcheck disable=SC2086  # CAPFLAGS is words on purpose: CAPFLAGS="--optimize-ddp python_reducer"
    pc cap_torch_4 280 run --mode train --nproc 4 "${PCBEST[@]}" ${CAPFLAGS:-} --profile torch
    mkdir -p "$D/cap_torch_4"
    i=0; find "$D/data" -name 'torch_trace.json' -newer "$D/.cap2_start" | sort | while read -r tr; do
        echo "$tr" >> "$D/cap_torch_4/traces.txt"; done
    mapfile -t TRACES < "$D/cap_torch_4/traces.txt"
    python3 scripts/comm_bound.py "${TRACES[@]}" --json "$D/cap_torch_4/comm_bound.json" > "$D/cap_torch_4/comm_bound.md" 2>&1
    cat "$D/cap_torch_4/comm_bound.md"
    [ -n "${OUT:-}" ] && [ -n "${TRACES[0]:-}" ] && gzip -c "${TRACES[0]}" > "$OUT/cap_torch_4_first_trace.json.gz"
    pack
fi
if want channels; then  # fewer NCCL channels (fewer SMs taken from the backward) against the default, 4 GPUs, in turn
    indep ind_chan_def_4 4 130 "${BEST[@]}" --bucket-mb 100
    before 420 && NCCL_MAX_NCHANNELS=8 indep ind_chan8_4 4 100 "${BEST[@]}" --bucket-mb 100
    before 480 && NCCL_MAX_NCHANNELS=16 indep ind_chan16_4 4 100 "${BEST[@]}" --bucket-mb 100
fi
if want fsdp; then  # FSDP2 on bf16 weights (the best DDP rung's numerics: bf16 gathers, reduce-scatters and a sharded
    # AdamW over bf16 shards, a quarter of the optimizer's 21 ms a rank), eager then compiled, then perfconsole's job
    FS=(--fsdp --bf16-weights)
    indep ind_fsdp_nr_eager_4 4 90 "${FS[@]}" --no-reshard
    indep ind_fsdp_nr_4 4 200 "${FS[@]}" --no-reshard --compile
    ms=$(python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['median_step_ms'])" "$D/ind_fsdp_nr_4.json" 2>/dev/null || echo 999)
    echo "ind_fsdp_nr_4 median $ms ms"
    if before 400 && python3 -c "import sys; sys.exit(float(sys.argv[1]) >= 112)" "$ms"; then
        pc pc_fsdp_nr_4 180 run --mode train --nproc 4 --parallel fsdp --weights bf16 --no-reshard --compile
    fi
    before 470 && indep ind_fsdp_4 4 110 "${FS[@]}" --compile
fi
if want hookopt; then  # each bucket's AdamW step in the all-reduce's callback, beside the rest of the backward
    indep ind_hookopt_4 4 150 "${BEST[@]}" --bucket-mb 100 --optimizer-in-hook
    indep ind_hookbase_4 4 100 "${BEST[@]}" --bucket-mb 100
    before 330 && indep ind_hookopt25_4 4 100 "${BEST[@]}" --bucket-mb 25 --optimizer-in-hook
    before 420 && indep ind_hookopt_2 2 100 "${BEST[@]}" --bucket-mb 100 --optimizer-in-hook
fi
if want autograd; then  # compiled autograd (optimize_ddp python_reducer) on the best rung against DDPOptimizer's
    # split graph, the script first (its compile fills the cache for neither: a graph of its own), then perfconsole
    indep ind_ca_4 4 200 "${BEST[@]}" --bucket-mb 100 --optimize-ddp python_reducer
    indep ind_ca_base_4 4 100 "${BEST[@]}" --bucket-mb 100
    before 300 && pc pc_ca_4 240 run --mode train --nproc 4 "${PCBEST[@]}" --optimize-ddp python_reducer
    before 430 && indep ind_ca_best_1 1 100 --no-wrap "${BEST[@]}"  # the one-GPU step both scale against
    before 520 && indep ind_ca_2 2 70 "${BEST[@]}" --bucket-mb 100 --optimize-ddp python_reducer
fi
if want cabuckets; then  # compiled autograd's fused all-reduces at smaller and larger buckets than 100 MB (inductor
    # concatenates the gradients into buckets of DDP's bucket_cap_mb): which hides more of the 19 ms it exposed at 4 GPUs
    indep ind_ca25_4 4 200 "${BEST[@]}" --bucket-mb 25 --optimize-ddp python_reducer
    before 420 && indep ind_ca400_4 4 170 "${BEST[@]}" --bucket-mb 400 --optimize-ddp python_reducer
fi
if want careorder; then  # compiled autograd with inductor's compute/communication reordering, beside it without
    indep ind_careorder_4 4 240 "${BEST[@]}" --bucket-mb 100 --optimize-ddp python_reducer --comm-reorder
    before 400 && indep ind_ca_again_4 4 170 "${BEST[@]}" --bucket-mb 100 --optimize-ddp python_reducer
fi
if want zero; then  # ZeRO-1 on the best rung: AdamW's state a quarter a rank, a broadcast of the shards a step
    before 380 && pc pc_zero_4 200 run --mode train --nproc 4 "${PCBEST[@]}" --zero
    before 420 && pc pc_zero_ca_4 170 run --mode train --nproc 4 "${PCBEST[@]}" --zero --optimize-ddp python_reducer
fi
if want shard; then  # ZeRO-2 in DDP's comm hook (--shard-step: gradients reduce-scattered, AdamW on each rank's
    # slice, parameters all-gathered) against the best rung on all the machine's GPUs (N), interleaved, and the
    # one-GPU step both scale against
    n=${SHARD_N:-$(nvidia-smi -L | wc -l)}
    indep ind_sb_1 1 120 --no-wrap "${BEST[@]}"
    indep "ind_shard_${n}_a" "$n" 150 "${BEST[@]}" --bucket-mb 100 --shard-step
    indep "ind_sbase_${n}_a" "$n" 120 "${BEST[@]}" --bucket-mb 100
    before 300 && pc "pc_zero2_${n}" 170 run --mode train --nproc "$n" "${PCBEST[@]}" --zero2
    before 400 && indep "ind_shard_${n}_b" "$n" 90 "${BEST[@]}" --bucket-mb 100 --shard-step
    before 470 && indep "ind_sbase_${n}_b" "$n" 90 "${BEST[@]}" --bucket-mb 100
fi
if want ncclenv; then  # NCCL's and CUDA's settings that decide how the best rung's all-reduces share the GPU with the
    # backward (NCCL_CTA_POLICY=1: NCCL's fewest CTAs for overlap, 2.27 on), on all the machine's GPUs (N), each once
    # between two runs without any (the script; ENV_END: the second
    # by which a run must have started, 480 unless said)
    n=${SHARD_N:-$(nvidia-smi -L | wc -l)}
    indep "ind_env_base_${n}_a" "$n" 200 "${BEST[@]}" --bucket-mb 100
    for v in NCCL_CTA_POLICY=1 CUDA_DEVICE_MAX_CONNECTIONS=32 NCCL_MIN_NCHANNELS=32 NCCL_PROTO=LL128 NCCL_ALGO=Tree; do
        before $(( ${ENV_END:-480} - 60 )) || break
        tag=$(echo "$v" | tr 'A-Z=' 'a-z_')
        echo "ind_env_${tag}_${n}: $v" >> "$D/commands.txt"
        ( export "${v?}"; indep "ind_env_${tag}_${n}" "$n" 90 "${BEST[@]}" --bucket-mb 100 )
    done
    before "${ENV_END:-480}" && indep "ind_env_base_${n}_b" "$n" 90 "${BEST[@]}" --bucket-mb 100
fi
if want fixtures; then  # small real captures for the timeline's tests: nsys (exported to SQLite) and the torch profiler
    KEPT=("${COMMON[@]}"); COMMON=(--size small --ctx 256 --batch 4 --warmup 2 --steps 2)
    mkdir -p "$D/fixtures" && touch "$D/fixtures/.start"
    pc fx_eager_nsys 90 run --mode train --profile nsys
    pc fx_compiled_nsys 120 run --mode train --profile nsys --compile
    pc fx_ddp2_nsys 120 run --mode train --profile nsys --nproc 2 --parallel ddp
    pc fx_eager_torch 90 run --mode train --profile torch
    pc fx_compiled_torch 120 run --mode train --profile torch --compile
    pc fx_ddp2_torch 120 run --mode train --profile torch --nproc 2 --parallel ddp
    # Each capture's .nsys-rep to SQLite (nsys export), and the torch traces, beside the records.
    find "$D" -path "$D/inductor" -prune -o -name '*.nsys-rep' -newer "$D/fixtures/.start" -print | while read -r rep; do
        base=$(basename "$(dirname "$rep")")_$(basename "$rep" .nsys-rep)
        timeout 120 nsys export --type sqlite --force-overwrite true -o "$D/fixtures/$base.sqlite" "$rep" \
            >> "$D/fixtures/export.log" 2>&1
        echo "$rep -> $base.sqlite: exit $?" >> "$D/fixtures/export.log"
    done
    find "$D" -path "$D/inductor" -prune -o -path "$D/fixtures" -prune -o -name 'torch_trace.json*' \
        -newer "$D/fixtures/.start" -print | while read -r tr; do
        ls -la "$tr" >> "$D/fixtures/traces.txt"
        cp "$tr" "$D/fixtures/$(basename "$(dirname "$tr")")_$(basename "$tr")"
    done
    ls -la "$D/fixtures" >> "$D/fixtures/export.log"
    COMMON=("${KEPT[@]}")
    pack
fi
echo "total $(( $(date +%s) - T0 )) s"
python3 scripts/four_gpu_table.py "$D"

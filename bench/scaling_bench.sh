#!/usr/bin/env bash
# sync_scaling: synchronous training of the synthetic ResNet-50 (apps/train/scaling.cpp: its
# variables with output channels / 4, 25.6 MB in pieces of at most 1 MiB, emulated compute) on 1,
# 2, 4 and 8 simulated hosts (scripts/cluster-run: a ps shard and a worker on each host), at
# 1 Gbit/s and 250 Mbit/s links, against the cost model's prediction
# (placement/data_parallel.hpp).
#
#   bench/scaling_bench.sh BUILD_DIR [OUT_DIR]
#
# The workload is balanced at 1 Gbit/s: a step's emulated compute equals the time one link takes
# to carry the parameters twice. Each point: 5 warm-up steps, then 20 timed; the cluster's rate
# is its chief's. The links honour the traffic classes Runnel marks (parameters before
# gradients, scripts/lib/netns.sh); the 8-worker points are also run on links that ignore them.
#
# The model predicts what the links and the protocol cost; what the emulating machine costs is
# measured, not modelled: its floor at N hosts is the same job on links too fast to bind (10
# Gbit/s), where every host's tasks share this machine's cores as they do at every rate. A
# point's prediction is the model's step at its rate plus the floor's excess over the model's
# step at 10 Gbit/s; the floors are separate runs, none of the points is fitted. The projection
# past 8 workers is for real hosts (each its own cores): the 1-worker step's fixed cost only.
# OUT_DIR (default ./runnel-scaling) gets the logs, scaling.tsv, the plot scaling.svg and
# trace-8w.json (step-8w.svg drawn): one 8-worker step at 1 Gbit/s as every worker and the
# chief's sync loop saw it (scripts/lib/sync_timeline.py, whose summary is printed). Then ddp_peer: the same at 2, 4 and
# 8 workers under PyTorch DDP (bench/peers/ddp_scaling.py), Runnel's rate as a ratio to DDP's.
set -euo pipefail
build=$1
out=${2:-$PWD/runnel-scaling}
root=$(cd "$(dirname "$0")/.." && pwd)
app=$build/apps/scaling
mkdir -p "$out"
if [[ $(id -u) -ne 0 ]]; then
  echo "bench sync_scaling: skipped: simulated hosts need root (network namespaces, tc)"
  exit 0
fi
source "$root/scripts/lib/netns.sh"
if ! why=$(netns_check); then
  echo "bench sync_scaling: skipped: $why"
  exit 0
fi
batch=32
scale=4
mbytes=$("$app" --describe --scale $scale | sed -n 's/.* pieces, \([0-9.]*\) MB of parameters/\1/p')
# Balanced at 1 Gbit/s (125 MB/s): compute = 2 x parameters / link.
compute_ms=$(awk -v m="$mbytes" 'BEGIN { printf "%.1f", 2 * m / 125 * 1000 }')
plane=$("$build/bench/cluster_bench" --only remote_tensor_64mib 2>/dev/null |
  sed -n 's/^bench remote_tensor_64mib: \([0-9.e+]*\) GB\/s.*/\1/p')
echo "bench: sync_scaling: $mbytes MB of parameters (ResNet-50's variables, output channels / $scale)," \
  "${compute_ms} ms of emulated compute a step (balanced at 1 Gbit/s), $batch examples a worker" \
  "a step; this machine's data plane moves $plane GB/s between two processes (remote_tensor_64mib)"
common=(--scale $scale --batch $batch --steps 20 --warmup 5)

# run NAME WORKERS RATE ARGS...: one cluster run; prints the chief's mean step (ms) and rate.
# With peer=1, the PyTorch DDP peer runs instead of the app; with links=--fifo-links, on links
# that ignore the traffic classes.
peer=0 links=""
run() {
  local name=$1 n=$2 rate=$3 program=("$app")
  shift 3
  ((peer == 0)) || program=(/usr/bin/python3 "$root/bench/peers/ddp_scaling.py")
  if ! "$root/scripts/cluster-run" --quiet $links --workers "$n" --rate "$rate" --logs "$out/$name" \
    -- "${program[@]}" "${common[@]}" "$@" >/dev/null; then
    echo "bench sync_scaling: the run $name failed (logs in $out/$name)" >&2
    exit 1
  fi
  sed -n 's/.*step \([0-9.]*\) ms mean.*, \([0-9.]*\) examples\/s/\1 \2/p' "$out/$name/worker-0.out"
}
predict() { "$app" "${common[@]}" --compute-ms "$compute_ms" --predict "$@"; }

# What this machine moves between simulated hosts: 8 of them exchange the model with no compute
# over links too fast to bind; the time beyond a lone worker's is the transfer.
read -r s1 _ < <(run probe-1w 1 10gbit --compute-ms 0)
read -r s8 _ < <(run probe-8w 8 10gbit --compute-ms 0)
host_mb=$(predict 8 | sed -n 's/.* a host moves \([0-9.]*\) MB each way.*/\1/p')
machine=$(awk -v h="$host_mb" -v a="$s1" -v b="$s8" 'BEGIN { printf "%.0f", 8 * h / ((b - a) / 1000) }')
echo "bench: sync_scaling: this machine moves $machine MB/s each way between 8 simulated hosts" \
  "(each host ${host_mb} MB a step; ${s8} ms a step with no compute against ${s1} ms for one worker)"

# model_step N MBIT: the model's step (ms) for N workers on MBIT links, no fixed cost.
model_step() { predict "$1" --link-mbit "$2" | sed -n 's/.*, step \([0-9.]*\) ms = .*/\1/p'; }
# This machine's floor at N hosts: the job on links too fast to bind. Its excess over the
# model's step there is what the shared machine (and the fixed per-step work) adds.
declare -A floor excess
for n in 1 2 4 8; do
  read -r floor[$n] _ < <(run "floor-${n}w" $n 10gbit --compute-ms "$compute_ms")
  excess[$n]=$(awk -v f="${floor[$n]}" -v m="$(model_step $n 10000)" 'BEGIN { printf "%.3f", f - m }')
done
echo "bench: sync_scaling: this machine's floor (the job on 10 Gbit/s links, which do not bind):" \
  "$(for n in 1 2 4 8; do printf '%s workers %s ms, ' $n "${floor[$n]}"; done)the best" \
  "efficiency it can show at 8 workers is $(awk -v a="${floor[1]}" -v b="${floor[8]}" 'BEGIN { printf "%.3f", a / b }')"

printf 'rate\tworkers\tmeasured\tpredicted\tefficiency\tpredicted_efficiency\n' >"$out/scaling.tsv"
worst=0 eff8=""
declare -A ours
for rate in 1gbit 250mbit; do
  mbit=$([[ $rate == 1gbit ]] && echo 1000 || echo 250)
  single=""
  emulated=""
  for n in 1 2 4 8; do
    extra=()
    [[ $rate == 1gbit && $n == 8 ]] && extra=(--trace "$out/trace-8w.json")
    read -r step_ms rate_ex < <(run "$rate-${n}w" $n $rate --compute-ms "$compute_ms" "${extra[@]}")
    [[ -n $single ]] || single=$rate_ex
    line=$(predict $n --link-mbit $mbit --overhead-ms "${excess[$n]}")
    emulated+="$line"$'\n'
    predicted=$(sed -n "s/^predict $n workers: \([0-9.]*\) ex\/s.*/\1/p" <<<"$line")
    sed -n 's/^scaling: machine CPU \(.*\) during the timed steps.*/\1/p' "$out/$rate-${n}w/worker-0.out" |
      sed "s/^/bench: sync_scaling_${n}w_$rate: machine CPU /"
    if [[ $n == 8 && $rate == 1gbit ]]; then
      /usr/bin/python3 "$root/scripts/lib/sync_timeline.py" --merged "$out/trace-8w.json" --svg "$out/step-8w.svg" \
        "$out/trace-8w-chief-step.json" "$out"/trace-8w-worker-?.json | sed 's/^/bench: /'
    fi
    read -r eff err peff < <(awk -v m="$rate_ex" -v p="$predicted" -v s="$single" -v n=$n \
      'BEGIN { printf "%.3f %.1f %.3f\n", m / (n * s), (p - m) / m * 100, p / (n * s) }')
    printf '%s\t%d\t%s\t%s\t%s\t%s\n' $rate $n "$rate_ex" "$predicted" "$eff" "$peff" >>"$out/scaling.tsv"
    echo "bench sync_scaling_${n}w_$rate: $rate_ex examples/s (${eff}x linear; predicted $predicted, ${err}%)"
    worst=$(awk -v w="$worst" -v e="$err" 'BEGIN { e = e < 0 ? -e : e; print (e > w ? e : w) }')
    [[ $rate == 1gbit && $n == 8 ]] && eff8=$eff
    [[ $n == 8 ]] && rate8=$rate_ex
    [[ $rate == 1gbit ]] && ours[$n]=$rate_ex
  done
  echo "$emulated" >"$out/prediction-$rate-emulated.txt"
  # Real hosts: the 1-worker step's fixed cost, no shared machine.
  overhead=${excess[1]}
  real=$(predict 1,2,4,8,16,32,64,100 --link-mbit $mbit --overhead-ms "$overhead")
  echo "$real" >"$out/prediction-$rate-real-hosts.txt"
  # The same 8 workers on links that ignore the traffic classes (one queue per link).
  links=--fifo-links
  read -r _ fifo_ex < <(run "$rate-8w-fifo" 8 $rate --compute-ms "$compute_ms")
  links=""
  echo "bench: sync_scaling_8w_$rate on links that ignore the traffic classes: $fifo_ex examples/s" \
    "($(awk -v m="$fifo_ex" -v s="$single" 'BEGIN { printf "%.3f", m / (8 * s) }')x linear;" \
    "with them $(awk -v a="${rate8:-0}" -v b="$fifo_ex" 'BEGIN { printf "%.2f", a / b }')x as fast)"
  # Real hosts, past what runs here.
  for n in 16 32 64 100; do
    sed -n "s/^predict $n workers: \([0-9.]*\) ex\/s, efficiency \([0-9.]*\),.*/$rate\t$n\t\t\1\t\t\2/p" \
      <<<"$real" >>"$out/scaling.tsv"
  done
  echo "bench: sync_scaling at $rate, 8 workers, on this machine: $(sed -n 's/^predict 8 workers: [^,]*, [^,]*, //p' <<<"$emulated")"
  echo "bench: sync_scaling at $rate on real hosts: $(sed -n 's/^predict \([0-9]*\) workers: [^,]*, efficiency \([0-9.]*\),.*/\1: \2/p' <<<"$real" | tr '\n' ' ')"
done
# What the 8 workers moved at 1 Gbit/s, against what this machine's data plane moves.
read -r step_ms _ < <(sed -n 's/.*step \([0-9.]*\) ms mean.*, \([0-9.]*\) examples\/s/\1 \2/p' "$out/1gbit-8w/worker-0.out")
awk -v h="$host_mb" -v s="$step_ms" -v p="$plane" -v m="$machine" 'BEGIN {
  agg = 8 * h / (s / 1000) / 1000
  printf "bench: sync_scaling traffic at 8 workers, 1 Gbit/s: %.2f GB/s each way in all (8 hosts x %.2f MB a %.0f ms step) = %.2fx what the data plane moves between two processes (%s GB/s), %.2fx what this machine moves between its simulated hosts (%.2f GB/s)\n", agg, h, s, agg / p, p, agg / (m / 1000), m / 1000
}'
/usr/bin/python3 "$root/scripts/lib/scaling_plot.py" "$out/scaling.tsv" "$out/scaling.svg"
# The peer: the same model, shapes and emulated compute under PyTorch DDP (gloo, buckets of
# 25 MB / scale) on the same hosts and links, same batch per worker.
ddp_line="skipped: PyTorch (python3-torch, installed by scripts/bench) is missing"
if /usr/bin/python3 -c 'import torch.distributed as d; assert d.is_gloo_available()' 2>/dev/null; then
  peer=1 ratios=()
  for n in 2 4 8; do
    read -r _ theirs < <(run "ddp-1gbit-${n}w" $n 1gbit --compute-ms "$compute_ms")
    if [[ -z $theirs ]]; then
      ddp_line="failed at $n workers (logs in $out/ddp-1gbit-${n}w)"
      break
    fi
    ratio=$(awk -v a="${ours[$n]}" -v b="$theirs" 'BEGIN { printf "%.2f", a / b }')
    ratios+=("$n: ${ratio}x")
    echo "bench: ddp_peer at $n workers, 1 Gbit/s: Runnel ${ours[$n]} examples/s, PyTorch DDP $theirs (${ratio}x)"
  done
  [[ -z $theirs ]] ||
    ddp_line="${ours[8]} examples/s (${ratio}x PyTorch DDP at 8 workers, 1 Gbit/s; ${ratios[*]}; target 1.0x)"
fi
echo "bench sync_scaling: $eff8 efficiency (8 workers at 1 Gbit/s against 8x one worker; target 0.90)"
echo "bench sync_scaling_model_error: $worst % (the largest over all measured points; target 15%)"
echo "bench ddp_peer: $ddp_line"

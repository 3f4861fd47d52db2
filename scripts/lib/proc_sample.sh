# A process's resident memory, open descriptors and threads as CSV rows (sourced by scripts/soak
# and scripts/chaos-soak; scripts/lib/soak_report.py reads them).
#   proc_sample_header                  # seconds,process,rss_kib,fds,threads
#   proc_sample SECONDS NAME PID        # one row; nothing when PID is gone

proc_sample_header() {
  echo "seconds,process,rss_kib,fds,threads"
}

proc_sample() {
  local seconds=$1 name=$2 pid=$3 rss thr fds
  rss=$(awk '/^VmRSS:/ {print $2}' "/proc/$pid/status" 2>/dev/null) || return 0
  thr=$(awk '/^Threads:/ {print $2}' "/proc/$pid/status" 2>/dev/null) || return 0
  fds=$(ls "/proc/$pid/fd" 2>/dev/null | wc -l)
  [[ -n $rss && -n $thr ]] || return 0
  echo "$seconds,$name,$rss,$fds,$thr"
}

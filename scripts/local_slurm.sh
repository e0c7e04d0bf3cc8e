#!/usr/bin/env bash
# A one-node Slurm cluster on this machine, for perfconsole's `slurm` tests (and for trying
# `--executor slurm` without a cluster): munged, MariaDB, slurmdbd (accounting: submitit and
# perfconsole read job states with sacct), slurmctld and slurmd, all run as root from a generated
# slurm.conf in one folder, $PERFCONSOLE_SLURM_DIR (default /tmp/perfconsole-slurm).
#
#   scripts/local_slurm.sh start     install Debian's packages if needed, start, wait for an idle node
#   scripts/local_slurm.sh status    exit 0 when `sinfo` answers with the node idle or in use
#   scripts/local_slurm.sh stop      stop every daemon this script started
#
# Clients find the cluster through SLURM_CONF: `start` prints `export SLURM_CONF=...`.
# The node claims 8 CPUs on any machine (config_overrides), so a few tiny CPU jobs run side by side
# on a 2-core machine; the scheduler runs on every submission (sched/builtin), and a job's end is
# reaped at once (KillWait=2), so a test's jobs start and finish in seconds.
set -euo pipefail

DIR="${PERFCONSOLE_SLURM_DIR:-/tmp/perfconsole-slurm}"
CONF="$DIR/slurm.conf"
HOST="$(hostname -s)"
# Ports of its own, so a real Slurm or a second copy elsewhere is not disturbed.
CTLD_PORT=16817; SLURMD_PORT=16818; DBD_PORT=16819; DB_PORT=16306
DB_PASS=perfconsole

log() { echo "local_slurm: $*" >&2; }

install_packages() {
  command -v slurmctld >/dev/null && command -v slurmdbd >/dev/null && command -v munged >/dev/null \
    && command -v mariadbd >/dev/null && return 0
  log "installing slurm-wlm, slurmdbd, munge and mariadb-server"
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq slurm-wlm slurmdbd munge mariadb-server >/dev/null \
    || { apt-get update -qq >/dev/null && DEBIAN_FRONTEND=noninteractive \
         apt-get install -y -qq slurm-wlm slurmdbd munge mariadb-server >/dev/null; }
}

write_config() {
  mkdir -p "$DIR"/{state,spool,log,db}
  cat >"$CONF" <<EOF
ClusterName=perfconsole
SlurmctldHost=$HOST(127.0.0.1)
SlurmctldPort=$CTLD_PORT
SlurmdPort=$SLURMD_PORT
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
StateSaveLocation=$DIR/state
SlurmdSpoolDir=$DIR/spool
SlurmctldPidFile=$DIR/slurmctld.pid
SlurmdPidFile=$DIR/slurmd.pid
SlurmctldLogFile=$DIR/log/slurmctld.log
SlurmdLogFile=$DIR/log/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
MpiDefault=none
ReturnToService=2
SchedulerType=sched/builtin
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
SlurmdParameters=config_overrides
KillWait=2
MinJobAge=600
MessageTimeout=10
InactiveLimit=0
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/slurmdbd
AccountingStorageHost=127.0.0.1
AccountingStoragePort=$DBD_PORT
AccountingStorageEnforce=associations
EnforcePartLimits=ALL
NodeName=$HOST NodeAddr=127.0.0.1 CPUs=8 RealMemory=4000 State=UNKNOWN
PartitionName=debug Nodes=$HOST Default=YES MaxTime=30 State=UP OverSubscribe=YES
EOF
  cat >"$DIR/slurmdbd.conf" <<EOF
AuthType=auth/munge
DbdHost=localhost
DbdPort=$DBD_PORT
SlurmUser=root
PidFile=$DIR/slurmdbd.pid
LogFile=$DIR/log/slurmdbd.log
StorageType=accounting_storage/mysql
StorageHost=127.0.0.1
StoragePort=$DB_PORT
StorageUser=slurm
StoragePass=$DB_PASS
StorageLoc=perfconsole_acct
EOF
  chmod 600 "$DIR/slurmdbd.conf"
  : >"$DIR/cgroup.conf"
}

wait_for() {  # wait_for SECONDS WHAT COMMAND...
  local n=$(( $1 * 4 )) what=$2; shift 2
  for ((i = 0; i < n; i++)); do "$@" >/dev/null 2>&1 && return 0; sleep 0.25; done
  log "$what did not come up; see $DIR/log"; return 1
}

start_db() {
  if [ ! -d "$DIR/db/mysql" ]; then
    mariadb-install-db --datadir="$DIR/db" --user=root --auth-root-authentication-method=socket >/dev/null
  fi
  mariadbd --datadir="$DIR/db" --user=root --socket="$DIR/db.sock" --port=$DB_PORT --bind-address=127.0.0.1 \
    --pid-file="$DIR/mariadb.pid" --log-error="$DIR/log/mariadb.log" --skip-log-bin >/dev/null 2>&1 &
  wait_for 60 mariadb mariadb --socket="$DIR/db.sock" -e "select 1"
  mariadb --socket="$DIR/db.sock" -e "CREATE USER IF NOT EXISTS 'slurm'@'%' IDENTIFIED BY '$DB_PASS';
    CREATE USER IF NOT EXISTS 'slurm'@'localhost' IDENTIFIED BY '$DB_PASS';
    GRANT ALL ON perfconsole_acct.* TO 'slurm'@'%'; GRANT ALL ON perfconsole_acct.* TO 'slurm'@'localhost';"
}

node_up() { SLURM_CONF="$CONF" sinfo -h -o %t 2>/dev/null | grep -Eq '^(idle|mix|alloc)'; }

start() {
  install_packages
  if node_up; then log "already running"; echo "export SLURM_CONF=$CONF"; return 0; fi
  stop >/dev/null 2>&1 || true
  write_config
  mkdir -p /run/munge /var/log/munge /var/lib/munge
  [ -s /etc/munge/munge.key ] || mungekey --create >/dev/null 2>&1 \
    || dd if=/dev/urandom of=/etc/munge/munge.key bs=1024 count=1 2>/dev/null
  chmod 600 /etc/munge/munge.key
  munged --force --pid-file="$DIR/munged.pid" --log-file="$DIR/log/munged.log" 2>/dev/null || true
  wait_for 20 munge sh -c 'munge -n | unmunge'
  start_db
  export SLURM_CONF="$CONF"
  slurmdbd  # reads slurmdbd.conf beside $SLURM_CONF
  wait_for 60 slurmdbd sacctmgr -n list cluster
  sacctmgr -i add cluster perfconsole >/dev/null 2>&1 || true
  sacctmgr -i add account perfconsole Description=tests Organization=perfconsole >/dev/null 2>&1 || true
  sacctmgr -i add user root Account=perfconsole DefaultAccount=perfconsole >/dev/null 2>&1 || true
  slurmctld -f "$CONF"
  slurmd -f "$CONF"
  wait_for 90 "the node" node_up
  log "one-node cluster up: $HOST (SLURM_CONF=$CONF)"
  echo "export SLURM_CONF=$CONF"
}

status() {
  if node_up; then SLURM_CONF="$CONF" sinfo; return 0; fi
  echo "local_slurm: not running (no idle node from SLURM_CONF=$CONF)"; return 1
}

stop_pid() {  # stop_pid FILE: SIGTERM the daemon a pid file names, then wait for it
  local f=$1 pid
  [ -s "$f" ] || return 0
  pid=$(cat "$f")
  kill "$pid" 2>/dev/null || { rm -f "$f"; return 0; }
  for ((i = 0; i < 40; i++)); do kill -0 "$pid" 2>/dev/null || break; sleep 0.25; done
  kill -9 "$pid" 2>/dev/null || true
  rm -f "$f"
}

stop() {
  if [ -f "$CONF" ]; then SLURM_CONF="$CONF" scancel --user=root --quiet 2>/dev/null || true; fi
  for d in slurmd slurmctld slurmdbd mariadb munged; do stop_pid "$DIR/$d.pid"; done
  log "stopped"
}

case "${1:-}" in
  start) start ;;
  stop) stop ;;
  status) status ;;
  *) echo "usage: $0 start|stop|status" >&2; exit 2 ;;
esac

#!/usr/bin/env bash
# Install what the cluster tests need on a fresh Debian 12 machine (run as root).
#   - Debian packages for a one-node SLURM: slurmctld slurmd slurm-client munge
#   - with a venv argument, also the project with its `cluster` and `test` extras into that venv
#     (the SLURM executor plugin is pinned in pyproject.toml):  tests/cluster/install.sh [VENV]
# Idempotent: packages already present are not reinstalled; apt is not run at all
# when every binary is already there.
set -euo pipefail

need_apt=0
for bin in slurmctld slurmd sbatch srun squeue sinfo scontrol munged mungekey; do
    command -v "$bin" >/dev/null 2>&1 || [ -x "/usr/sbin/$bin" ] || need_apt=1
done

if [ "$need_apt" = 1 ]; then
    if [ "$(id -u)" != 0 ]; then
        echo "install.sh: installing SLURM needs root (apt-get)" >&2
        exit 1
    fi
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    # --no-install-recommends keeps it small; policy-rc.d / no systemd means the
    # packages' own services are not started: tests/cluster/slurm.sh starts them.
    apt-get install -y -qq --no-install-recommends \
        slurmctld slurmd slurm-client munge >/dev/null
fi

# munge needs a key; the Debian package normally creates one, make sure.
if [ ! -s /etc/munge/munge.key ]; then
    install -d -o munge -g munge -m 0700 /etc/munge
    runuser -u munge -- /usr/sbin/mungekey --create --keyfile=/etc/munge/munge.key
fi

venv="${1:-}"
if [ -n "$venv" ]; then
    repo="$(cd "$(dirname "$0")/../.." && pwd)"
    "$venv/bin/python" -m pip install -q -e "$repo[test,cluster]"
fi
echo "install.sh: $(dpkg-query -W -f '${Package} ${Version} ' slurmctld slurmd slurm-client munge) ready"

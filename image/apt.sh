#!/usr/bin/env bash
# apt.sh runs apt-get for boxwire's set-up scripts: one boxwire install at a
# time (our lock, /run/lock/boxwire-apt.lock, so the parallel parts of
# `make test` queue instead of failing on dpkg's lock), waiting up to ten
# minutes for dpkg's own lock when something else holds it
# (unattended-upgrades, a person's apt-get), and retrying `apt-get update`
# while another apt-get holds the package lists, which apt does not wait for.
#
#   image/apt.sh install PKG...    install, updating the lists first if the
#                                  install fails without them
#   image/apt.sh download PKG...   download the .deb files into the current folder
set -euo pipefail
export DEBIAN_FRONTEND=noninteractive
lock=/run/lock/boxwire-apt.lock

exec 9>"$lock"
flock -w 900 9 || { echo "apt: another boxwire install held $lock for 15 minutes" >&2; exit 1; }

aptget() { apt-get -o DPkg::Lock::Timeout=600 -y -qq "$@"; }

update() {
  local out
  for _ in $(seq 60); do
    if out=$(aptget update 2>&1); then return 0; fi
    case $out in
      *"Could not get lock"*) sleep 5 ;;
      *) echo "$out" >&2; return 1 ;;
    esac
  done
  echo "apt: the package lists stayed locked for 5 minutes: $out" >&2
  return 1
}

cmd=${1:?usage: apt.sh install|download PKG...}
shift
case $cmd in
  install|download)
    aptget "$cmd" "$@" >/dev/null 2>&1 || { update && aptget "$cmd" "$@" >/dev/null; } ;;
  *) echo "apt: unknown command $cmd (install, download)" >&2; exit 2 ;;
esac

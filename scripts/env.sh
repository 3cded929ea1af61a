# shellcheck shell=bash
# Sourced by scripts/setup.sh and scripts/run.sh: puts the workspace's environment in place.
#
# With /opt/ros/jazzy present (robot PC, docker/), ROS 2 comes from there and .venv only
# adds the Python packages ROS does not ship. Otherwise ROS 2 Jazzy comes from PyPI wheels
# inside .venv (see ../shared/ros2-from-pip.md for why each variable is set).

SLIDE_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
export SLIDE_ROOT
# The configuration folder (workcell.yaml, camera extrinsics) slide_core reads.
export SLIDE_CONFIG_DIR="${SLIDE_CONFIG_DIR:-$SLIDE_ROOT/config}"
SLIDE_VENV="$SLIDE_ROOT/.venv"
export SLIDE_ROS_DISTRO_DIR="${SLIDE_ROS_DISTRO_DIR:-/opt/ros/jazzy}"

if [ -f "$SLIDE_ROS_DISTRO_DIR/setup.bash" ]; then
  export SLIDE_ROS_FROM=apt
  # setup.bash reads unset variables.
  set +u
  # shellcheck disable=SC1091
  source "$SLIDE_ROS_DISTRO_DIR/setup.bash"
else
  export SLIDE_ROS_FROM=pip
fi

if [ -d "$SLIDE_VENV" ]; then
  export VIRTUAL_ENV="$SLIDE_VENV"
  export PATH="$SLIDE_VENV/bin:$PATH"
  if [ "$SLIDE_ROS_FROM" = pip ]; then
    export AMENT_PREFIX_PATH="$SLIDE_VENV" CMAKE_PREFIX_PATH="$SLIDE_VENV"
    _slide_sp="$SLIDE_VENV/lib/python3.11/site-packages"
    _slide_libs="$(ls -d "$_slide_sp"/ros_*.libs 2>/dev/null | tr '\n' ':')"
    export LD_LIBRARY_PATH="${_slide_libs}$SLIDE_VENV/lib:${LD_LIBRARY_PATH:-}"
    export RMW_IMPLEMENTATION="${RMW_IMPLEMENTATION:-rmw_fastrtps_cpp}"
    # Laptops and CI: DDS discovery stays on this machine unless asked otherwise.
    export ROS_AUTOMATIC_DISCOVERY_RANGE="${ROS_AUTOMATIC_DISCOVERY_RANGE:-LOCALHOST}"
    unset _slide_sp _slide_libs
  fi
fi

# Fast DDS with shared-memory segments large enough for point clouds (config/fastdds.xml).
if [ -z "${FASTRTPS_DEFAULT_PROFILES_FILE:-}" ] && [ -z "${FASTDDS_DEFAULT_PROFILES_FILE:-}" ]; then
  export FASTRTPS_DEFAULT_PROFILES_FILE="$SLIDE_ROOT/config/fastdds.xml"
fi

# Headless rendering for the MuJoCo twin's camera.
export MUJOCO_GL="${MUJOCO_GL:-osmesa}"
export PYOPENGL_PLATFORM="${PYOPENGL_PLATFORM:-osmesa}"
# Plots are written to files, never shown.
export MPLBACKEND="${MPLBACKEND:-Agg}"

if [ -f "$SLIDE_ROOT/install/local_setup.bash" ]; then
  set +u
  # shellcheck disable=SC1091
  source "$SLIDE_ROOT/install/local_setup.bash"
fi

#!/usr/bin/env bash
# Run one command inside the slide environment (venv, ROS 2 variables, sourced install/).
#   scripts/run.sh slide --help
#   scripts/run.sh python -c "import rclpy, slide_interfaces"
set -euo pipefail
if [ "$#" -eq 0 ]; then
  echo "usage: scripts/run.sh CMD [ARGS...]   (run scripts/setup.sh first)" >&2
  exit 2
fi
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
if [ ! -d "$here/../.venv" ] || [ ! -f "$here/../install/local_setup.bash" ]; then
  echo "run.sh: the workspace is not set up; run scripts/setup.sh first" >&2
  exit 2
fi
# shellcheck source=scripts/env.sh
source "$here/env.sh"
exec "$@"

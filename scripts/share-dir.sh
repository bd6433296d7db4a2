#!/usr/bin/env bash
# Prints where axonn's fetched files named NAME (gpt2, llama3) go by default, and where axonn looks for
# them: /usr/local/share/axonn/NAME as root, else ${XDG_CACHE_HOME:-$HOME/.cache}/axonn/NAME.
set -euo pipefail
if [ "$(id -u)" -eq 0 ]; then
  echo "/usr/local/share/axonn/$1"
else
  echo "${XDG_CACHE_HOME:-$HOME/.cache}/axonn/$1"
fi

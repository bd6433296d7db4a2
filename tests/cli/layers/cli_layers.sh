#!/usr/bin/env bash
# The layering check (cmake/check_layers.cmake, run by every build): it passes on the project's tree,
# and it fails, naming the file and the layer, on a tree where a layer includes a layer above it or one
# it does not link. Usage: cli_layers.sh CASE CMAKE LAYERS_FILE SOURCE_DIR
case_name=$1 cmake=$2 layers_file=$3 source_dir=$4
axonn=/bin/false mpiexec=/bin/false
. "$(dirname "$0")/../common.sh"
check_tree() { run "$cmake" -DLAYERS_FILE="$layers_file" -DSOURCE_DIR="$1" -P "$source_dir/cmake/check_layers.cmake"; }

case $case_name in
  project_tree) check_tree "$source_dir"; echo "ok: no include goes around a layer's links" ;;
  upward_include)
    mkdir -p "$tmp/tree/src/model" "$tmp/tree/include/axonn/planner"
    printf '#include "axonn/core/error.hpp"\n#include "axonn/parallel/grid.hpp"\n' >"$tmp/tree/src/model/fine.cpp"
    printf '#include <vector>\n#include "axonn/train/trainer.hpp"\n' >"$tmp/tree/src/model/bad.cpp"
    printf '#include "axonn/optim/adamw.hpp"\n' >"$tmp/tree/include/axonn/planner/sideways.hpp"
    expect_error "src/model/bad.cpp: '#include \"axonn/train/trainer.hpp\"': the model layer links only" \
      "$cmake" -DLAYERS_FILE="$layers_file" -DSOURCE_DIR="$tmp/tree" -P "$source_dir/cmake/check_layers.cmake"
    expect_output "include/axonn/planner/sideways.hpp: '#include \"axonn/optim/adamw.hpp\"': the planner layer links only planner, "
    expect_no_output "fine.cpp" ;;
  *) echo "unknown case $case_name"; exit 2 ;;
esac

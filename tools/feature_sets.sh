# The five feature sets of the real-library runs (issues 12, 37 and 39), sourced by
# tools/real_coverage.sh and tools/real_tensile.sh: `flags_for SET` prints the sqtt-patch flags.
#   scopes  functions + barriers + kernel scopes     memory  memory-operation markers 2:5
#   trace   per-lane address tracing                 scope   scopes + the HW_ID scope filter
#   clock   scopes + gfx12 shader-clock packing
flags_for() {
  case $1 in
    scopes) echo "--functions 1 --barriers 1 --kernel-scopes" ;;
    memory) echo "--memory 2:5" ;;
    trace) echo "--trace-addresses memory,lds" ;;
    scope) echo "--functions 1 --barriers 1 --kernel-scopes --scope" ;;
    clock) echo "--functions 1 --barriers 1 --kernel-scopes --shader-clock-bits 12" ;;
    *) echo "unknown feature set $1 (scopes memory trace scope clock)" >&2; return 2 ;;
  esac
}

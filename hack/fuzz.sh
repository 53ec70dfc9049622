#!/usr/bin/env bash
# Runs one of oz's cargo-fuzz targets (fuzz/fuzz_targets/) under libFuzzer.
#
#   hack/fuzz.sh TARGET [SECONDS]        fuzz TARGET for SECONDS (default 60)
#   hack/fuzz.sh TARGET --replay FILE    run one input again (a crash from fuzz/artifacts/TARGET/)
#   hack/fuzz.sh list                    the targets: duration, pod_mutation, admission
#
# The corpus grows in fuzz/corpus/TARGET (not committed), starting from fuzz/seeds/TARGET;
# crashes are written to fuzz/artifacts/TARGET/. Needs cargo-fuzz (`cargo install cargo-fuzz
# --locked`). With a nightly toolchain it runs under AddressSanitizer; with stable alone,
# without a sanitizer (RUSTC_BOOTSTRAP=1, --sanitizer none), which still catches panics,
# integer overflow (debug assertions are on), timeouts and memory blow-ups.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
fuzz="$here/../fuzz"
die() { echo "fuzz: $*" >&2; exit 1; }

targets() { sed -n 's/^name = "\(.*\)"$/\1/p' "$fuzz/Cargo.toml" | grep -v '^oz-fuzz$'; }

[ $# -ge 1 ] || { sed -n '2,12p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 2; }
if [ "$1" = list ]; then targets; exit 0; fi
target=$1; shift
targets | grep -qx "$target" || die "unknown target $target; known: $(targets | tr '\n' ' ')"
command -v cargo-fuzz >/dev/null || die "cargo-fuzz is not installed: cargo install cargo-fuzz --locked"

if rustup run nightly rustc --version >/dev/null 2>&1; then
  toolchain=(+nightly) sanitizer=address
else
  toolchain=() sanitizer=none
  export RUSTC_BOOTSTRAP=1
fi
cd "$fuzz"
flags=(--sanitizer "$sanitizer" --debug-assertions)

if [ "${1:-}" = --replay ]; then
  [ $# -eq 2 ] || die "usage: hack/fuzz.sh TARGET --replay FILE"
  exec cargo "${toolchain[@]}" fuzz run "${flags[@]}" "$target" "$2"
fi

seconds=${1:-60}
mkdir -p "corpus/$target" "artifacts/$target"
echo "fuzz: $target for ${seconds}s (sanitizer: $sanitizer)" >&2
# One job: the machines this runs on have 2 cores, shared. Inputs above 2 s or 2 GiB are bugs.
exec cargo "${toolchain[@]}" fuzz run "${flags[@]}" "$target" "corpus/$target" "seeds/$target" -- \
  -max_total_time="$seconds" -timeout=2 -rss_limit_mb=2048 -print_final_stats=1

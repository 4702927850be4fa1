#!/usr/bin/env bash
# Call costs side by side with pluginop, the Core QUIC paper's prototype.
#
#   tools/bench-pluginop.sh PLUGINOP_DIR [TABLE_FILE]
#
# Runs pluginop's criterion benches (package pluginop-mock, bench
# `benchmarks`) and ours (corequic-runtime, bench `runtime`) back to back on
# this machine, then prints each pair of figures and their ratio, with the
# goals of docs/measurements.md. PLUGINOP_DIR is a checkout of
# github.com/core-quic/pluginop; it is copied, never modified.
#
# pluginop's wasmer 4.4 builds with Rust 1.88.0 (newer toolchains fail on
# `__rust_probestack`), so the script installs that toolchain with rustup and
# resolves pluginop's dependencies (it has no lock file) to versions that
# 1.88.0 can build.
set -euo pipefail

if [ $# -lt 1 ] || [ ! -f "$1/mock/benches/benchmarks.rs" ]; then
  echo "usage: $0 PLUGINOP_DIR [TABLE_FILE]  (a checkout of github.com/core-quic/pluginop)" >&2
  exit 2
fi
pluginop=$(cd "$1" && pwd)
table_file=${2:-}
root=$(cd "$(dirname "$0")/.." && pwd)
target=${CARGO_TARGET_DIR:-$root/target}
mkdir -p "$target"
target=$(cd "$target" && pwd)
toolchain=1.88.0

rustup toolchain list | grep -q "^$toolchain" ||
  rustup toolchain install "$toolchain" --profile minimal

work="$target/pluginop-src"
rm -rf "$work"
mkdir -p "$work"
cp -r "$pluginop"/. "$work"
rm -f "$work/Cargo.lock"

echo "== pluginop ($(git -C "$pluginop" rev-parse --short HEAD 2>/dev/null || echo 'no git'), Rust $toolchain)" >&2
(cd "$work" &&
  CARGO_RESOLVER_INCOMPATIBLE_RUST_VERSIONS=fallback \
    cargo "+$toolchain" bench --target-dir "$target/pluginop" \
    -p pluginop-mock --bench benchmarks -- --output-format bencher) |
  tee "$target/pluginop-bench.txt" >&2
echo "== corequic ($(git -C "$root" rev-parse --short HEAD 2>/dev/null || echo 'no git'))" >&2
(cd "$root" &&
  cargo bench -p corequic-runtime --bench runtime -- --output-format bencher) |
  tee "$target/corequic-bench.txt" >&2

python3 - "$target/pluginop-bench.txt" "$target/corequic-bench.txt" "$table_file" <<'EOF'
import re, sys

def parse(path):
    """`test NAME ... bench: N ns/iter (+/- M)` lines of criterion's bencher format."""
    out = {}
    for line in open(path, encoding="utf-8"):
        m = re.match(r"test (.+?) \.\.\. bench:\s+([\d,]+) ns/iter", line)
        if m:
            out[m.group(1)] = int(m.group(2).replace(",", ""))
    return out

theirs, ours = parse(sys.argv[1]), parse(sys.argv[2])
# (our name, pluginop's name, goal as a ratio to pluginop, our runs per pluginop run)
rows = [
    ("run and return", "run and return", 0.8, 1),
    ("input outputs", "input outputs", 0.25, 1),
    ("increase-max-data", "increase-max-data", None, 1),
    ("max-data send and receive/native", "max-data send and receive", None, 1),
    ("max-data send and receive/wasm", "max-data wasm send and receive", 0.2, 1),
    ("super-frame send and receive", "super-frame send and receive", 0.2, 1),
    # pluginop's "loading plugins" loads one plugin, compiling it; ours
    # loads four from a warm cache, so it is compared per plugin.
    ("loading plugins/load 4 reference plugins from a warm cache", "loading plugins", None, 4),
]

def human(ns):
    return f"{ns / 1e6:.2f} ms" if ns >= 1e6 else f"{ns / 1e3:.2f} µs" if ns >= 1e3 else f"{ns:.0f} ns"

lines = [
    "| benchmark | pluginop | corequic | ratio | goal |",
    "|---|---|---|---|---|",
]
missing = []
for ours_name, theirs_name, goal, per in rows:
    if ours_name not in ours or theirs_name not in theirs:
        missing.append(ours_name if ours_name not in ours else f"pluginop's {theirs_name}")
        continue
    mine = ours[ours_name] / per
    ratio = mine / theirs[theirs_name]
    verdict = "—" if goal is None else f"≤ {goal}× {'met' if ratio <= goal else 'not met'}"
    label = ours_name + (f" (per plugin, of {per})" if per > 1 else "")
    lines.append(f"| {label} | {human(theirs[theirs_name])} | {human(mine)} | {ratio:.2f}× | {verdict} |")
table = "\n".join(lines) + "\n"
print(table)
if sys.argv[3]:
    open(sys.argv[3], "w", encoding="utf-8").write(table)
if missing:
    sys.exit("missing benchmarks: " + ", ".join(missing))
EOF

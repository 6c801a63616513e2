#!/usr/bin/env bash
# The QUIC comparison behind docs/design.md's choice of quinn-proto: N
# requests (40 bytes up, 1,000 bytes down, 10 streams at a time) over one
# connection, client and server in one process, counted by callgrind inside
# the server's side only. Instruction counts repeat to within 0.5% on a
# busy machine, where times do not. Usage: bench/quic-compare/run.sh [N]
set -euo pipefail
cd "$(dirname "$0")"
n=${1:-1000}
export CERT_DIR=$PWD/target
mkdir -p target
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes \
    -keyout target/key.pem -out target/cert.pem -days 30 -subj /CN=localhost \
    -addext subjectAltName=DNS:localhost 2>/dev/null
for impl in quinn quiche; do
    start=$(date +%s)
    cargo build --release --quiet --manifest-path "$impl/Cargo.toml"
    bin=$impl/target/release/qb-$impl
    echo "$impl: built in $(($(date +%s) - start)) s; $(strip -o target/$impl.stripped "$bin" && stat -c %s target/$impl.stripped) bytes stripped"
    for count in 1 "$n"; do
        valgrind --tool=callgrind --toggle-collect='*server_side_all*' \
            --callgrind-out-file="target/cg.$impl.$count" "$bin" "$count" 2>&1 |
            awk -v c="$count" '/Collected/ {print "  " c " requests: " $4 " instructions in the server"}'
    done
done

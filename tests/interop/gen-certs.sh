#!/usr/bin/env bash
# Makes a throwaway CA and certificates for the TLS cases of the interop battery:
#   tests/interop/gen-certs.sh DIR
# DIR/ca.crt          the CA (what clients and --tls-ca-cert-file trust)
# DIR/server.{crt,key} for every node: CN localhost, SAN localhost, 127.0.0.1, ::1
# DIR/client.{crt,key} a client certificate for mutual TLS (extendedKeyUsage clientAuth)
# Keys are EC P-256; valid for 2 days. Needs the openssl CLI.
set -euo pipefail
DIR="${1:?usage: gen-certs.sh DIR}"
mkdir -p "$DIR"
cd "$DIR"
ossl() { openssl "$@" 2>/dev/null; }
ossl ecparam -name prime256v1 -genkey -noout -out ca.key
ossl req -x509 -new -key ca.key -sha256 -days 2 -subj "/CN=redlockd test CA" \
  -addext "basicConstraints=critical,CA:TRUE" -addext "keyUsage=critical,keyCertSign,cRLSign" \
  -out ca.crt
leaf() { # name subject ext
  ossl ecparam -name prime256v1 -genkey -noout -out "$1.ec.key"
  # PKCS#8, the form every client library reads
  ossl pkcs8 -topk8 -nocrypt -in "$1.ec.key" -out "$1.key"
  rm -f "$1.ec.key"
  ossl req -new -key "$1.key" -subj "$2" -out "$1.csr"
  printf '%s\n' "$3" >"$1.ext"
  ossl x509 -req -in "$1.csr" -CA ca.crt -CAkey ca.key -CAcreateserial -days 2 -sha256 \
    -extfile "$1.ext" -out "$1.crt"
  rm -f "$1.csr" "$1.ext"
}
leaf server "/CN=localhost" "basicConstraints=CA:FALSE
keyUsage=critical,digitalSignature
extendedKeyUsage=serverAuth
subjectAltName=DNS:localhost,IP:127.0.0.1,IP:::1"
leaf client "/CN=redlockd test client" "basicConstraints=CA:FALSE
keyUsage=critical,digitalSignature
extendedKeyUsage=clientAuth"
rm -f ca.srl
chmod 600 ./*.key

#!/bin/sh
# The main job on embedded defaults: a fresh device key in a demo keystore,
# a challenge signature and a device token, each verified by tools that are
# not devtrust (openssl, python3-cryptography) and by `devtrust verify`.
set -eu

devtrust=${1:-.build/release/devtrust}
demo=.demo
keystore=$demo/keystore
rm -rf "$demo"
mkdir -p "$demo"
chmod 700 "$demo"
export DEVTRUST_KEYSTORE="$keystore"
step() { printf '\n== %s\n' "$*"; }

# A software TPM for the demo when swtpm is installed (the key then lives in it).
if command -v swtpm >/dev/null 2>&1; then
    port=$(( 24000 + $$ % 4000 * 2 ))
    mkdir -p "$demo/swtpm"
    swtpm socket --tpm2 --server type=tcp,bindaddr=127.0.0.1,port=$port \
        --ctrl type=tcp,bindaddr=127.0.0.1,port=$((port + 1)) --tpmstate dir="$demo/swtpm" \
        --flags not-need-init,startup-clear --pid file="$demo/swtpm.pid" &
    trap 'swtpm_ioctl --tcp 127.0.0.1:$((port + 1)) -s 2>/dev/null || kill "$(cat "$demo/swtpm.pid")" 2>/dev/null' EXIT
    for _ in 1 2 3 4 5 6 7 8 9 10; do [ -s "$demo/swtpm.pid" ] && break; sleep 0.1; done
    export DEVTRUST_TCTI="swtpm:host=127.0.0.1,port=$port"
    echo "demo TPM: swtpm at $DEVTRUST_TCTI"
fi

step "devtrust init: create the device key (in the TPM when one answers, else in software)"
"$devtrust" init

step "devtrust status"
"$devtrust" status

step "devtrust pubkey: what registration sends as publicKey"
"$devtrust" pubkey

challenge=q3x3Zp3j0JvFf1m7m3kF5G8W2sV6l9d0QhYp4n1eT0Y
step "devtrust sign-challenge $challenge"
signature=$("$devtrust" sign-challenge "$challenge")
echo "$signature"

step "openssl verifies the DER signature over the decoded challenge"
"$devtrust" pubkey --format pem > "$demo/public.pem"
printf '%s' "$signature" | base64 -d > "$demo/signature.der"
printf '%s' "$challenge" | tr '_-' '/+' | sed 's/$/=/' | base64 -d > "$demo/challenge.bin"
openssl dgst -sha256 -verify "$demo/public.pem" -signature "$demo/signature.der" "$demo/challenge.bin"

device_id=74070bae-df8c-42bf-8754-5173c237c936
step "devtrust token --device-id $device_id"
token=$("$devtrust" token --device-id "$device_id" --claim lockScreen=true)
echo "$token"

step "the token decoded"
"$devtrust" verify --json --public-key "$("$devtrust" pubkey)" --jwt "$token" --max-age 300

step "python3-cryptography verifies the token's raw r||s signature"
printf '{"spki":"%s","jws":["%s"]}' "$("$devtrust" pubkey)" "$token" \
    | /usr/bin/python3 Tests/Interop/verify_es256.py
echo

step "use it: curl -H \"X-Device-Token: \$(devtrust token)\" https://..."
echo "(registration with a server comes with \`devtrust register\`; see docs/usage.md)"
echo
echo "demo keystore: $keystore (remove with: rm -rf $demo)"

#!/bin/sh
# The main job on embedded defaults: a fresh device key (in a swtpm when
# installed, else in software) in a demo keystore, registered with the
# project's reference flow server on loopback, and device tokens that the
# server accepts; signatures checked by tools that are not devtrust
# (openssl, python3-cryptography) and by `devtrust verify`.
set -eu

devtrust=${1:-.build/release/devtrust}
demo=.demo
keystore=$demo/keystore
rm -rf "$demo"
mkdir -p "$demo"
chmod 700 "$demo"
# The demo's own keystore, cache and configuration, all in $demo: as root, devtrust's
# defaults are the machine's /var/lib/devtrust, /var/cache/devtrust and /etc/devtrust
# (docs/usage.md). XDG_CACHE_HOME and XDG_CONFIG_HOME count only when absolute; the
# configuration is empty (embedded defaults), so neither /etc/devtrust's nor ~/.config's is read.
export DEVTRUST_KEYSTORE="$keystore"
export XDG_CACHE_HOME="$PWD/$demo/cache" XDG_CONFIG_HOME="$PWD/$demo/config"
unset DEVTRUST_CONFIG
mkdir -p "$XDG_CONFIG_HOME/devtrust"
echo '{}' > "$XDG_CONFIG_HOME/devtrust/config.json"
step() { printf '\n== %s\n' "$*"; }

# A software TPM for the demo when swtpm is installed (the key then lives in it).
if command -v swtpm >/dev/null 2>&1; then
    port=$(( 24000 + $$ % 4000 * 2 ))
    mkdir -p "$demo/swtpm"
    swtpm socket --tpm2 --server type=tcp,bindaddr=127.0.0.1,port=$port \
        --ctrl type=tcp,bindaddr=127.0.0.1,port=$((port + 1)) --tpmstate dir="$demo/swtpm" \
        --flags not-need-init,startup-clear --pid file="$demo/swtpm.pid" &
    stop_swtpm() { swtpm_ioctl --tcp 127.0.0.1:$((port + 1)) -s 2>/dev/null || kill "$(cat "$demo/swtpm.pid")" 2>/dev/null; }
    for _ in 1 2 3 4 5 6 7 8 9 10; do [ -s "$demo/swtpm.pid" ] && break; sleep 0.1; done
    export DEVTRUST_TCTI="swtpm:host=127.0.0.1,port=$port"
    echo "demo TPM: swtpm at $DEVTRUST_TCTI"
fi

# The project's reference flow server (Tests/ReferenceServer) on loopback, as the identity server.
/usr/bin/python3 Tests/ReferenceServer/reference_server.py --port 0 --db "$demo/server.sqlite" --otp 246810 \
    --require-claim platform=linux > "$demo/server.out" 2> "$demo/server.log" &
server_pid=$!
cleanup() { kill "$server_pid" 2>/dev/null; if command -v stop_swtpm >/dev/null; then stop_swtpm; fi; }
trap cleanup EXIT
for _ in $(seq 50); do grep -q "listening on" "$demo/server.out" 2>/dev/null && break; sleep 0.1; done
server=$(sed -n 's/^listening on //p' "$demo/server.out")
[ -n "$server" ] || { echo "the reference server did not start:" >&2; cat "$demo/server.log" >&2; exit 1; }
echo "demo server: the reference flow server at $server"

step "devtrust init: create the device key (in the TPM when one answers, else in software)"
"$devtrust" init

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

step "devtrust register: walk the server's registration flow (credentials, email OTP, Device Registration)"
"$devtrust" register --server "$server" --non-interactive --device-model "devtrust demo" \
    --input http://wso2.com/claims/emailaddress=demo@example.com --input password=demo-password --input otp=246810

step "devtrust status"
"$devtrust" status

step "devtrust token: a fresh device token for every request (deviceId = the registration id)"
token=$("$devtrust" token --claim lockScreen=true)
echo "$token"

step "curl -H \"X-Device-Token: \$(devtrust token)\" $server/api/device-check"
curl -sS -H "X-Device-Token: $("$devtrust" token)" "$server/api/device-check"
echo
step "the same token twice: the server refuses the replay"
curl -sS -H "X-Device-Token: $token" "$server/api/device-check" >/dev/null
curl -sS -H "X-Device-Token: $token" "$server/api/device-check"
echo

step "devtrust login: app-native sign-in at the reference server, carrying a fresh device token"
"$devtrust" login --server "$server" --client-id devtrust-app --non-interactive --authenticator BasicAuthenticator \
    --input username=alice@example.com --input "password=correct horse"
echo "the server's record of the device token it got (this sign-in's, from its /api/signin-records):"
# Said, or the demo fails saying why: never an empty line.
curl -sS "$server/api/signin-records" | /usr/bin/python3 -c '
import json, sys
answer = sys.stdin.read()
if not answer.strip():
    sys.exit("demo: the server did not answer /api/signin-records")
records = json.loads(answer)
if not records:
    sys.exit("demo: the server recorded no sign-in")
print(json.dumps(records[-1], indent=2))'

step "devtrust access-token (for: curl -H \"Authorization: Bearer \$(devtrust access-token)\" ...)"
"$devtrust" access-token | cut -c1-16 | sed 's/$/… (truncated here)/'

step "the token decoded"
"$devtrust" verify --json --public-key "$("$devtrust" pubkey)" --jwt "$token" --max-age 300

step "python3-cryptography verifies the token's raw r||s signature"
printf '{"spki":"%s","jws":["%s"]}' "$("$devtrust" pubkey)" "$token" \
    | /usr/bin/python3 Tests/Interop/verify_es256.py
echo

echo "demo keystore: $keystore, cache: $XDG_CACHE_HOME/devtrust, configuration: $XDG_CONFIG_HOME/devtrust (remove with: rm -rf $demo)"

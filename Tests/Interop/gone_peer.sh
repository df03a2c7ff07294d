#!/bin/bash
# Run in a network namespace of its own (unshare -n), as root, by BrowserSignInTests:
#   gone_peer.sh DEVTRUST REFERENCE_SERVER SCRATCH
# A callback whose sender has gone, on a port a program of the user's then listens on:
# devtrust (stopped meanwhile) accepts it after the sender's socket is gone, and the
# kernel's exact lookup of the other end then finds that listener instead. The sender is
# another user (nobody) with its own code for this sign-in's PKCE challenge and state.
# Prints "outcome: refused" when devtrust would not take it, "outcome: taken" when it did.
set -u
squatter= login=
devtrust=$1 server_script=$2 scratch=$3
ip link set lo up
# FIN_WAIT2 of a closed socket lasts this long here (the default is 60 s); per namespace.
sysctl -q -w net.ipv4.tcp_fin_timeout=1
export DEVTRUST_KEYSTORE=$scratch/ks XDG_CACHE_HOME=$scratch/cache XDG_CONFIG_HOME=$scratch/config HOME=$scratch/home
mkdir -p "$scratch/home"
/usr/bin/python3 "$server_script" --port 0 --db "$scratch/db.sqlite" --otp 123456 --browser-login approve > "$scratch/server.out" 2>&1 &
server=$!
# SIGKILL: a test runner's children may inherit a signal mask that blocks SIGTERM.
trap 'kill -KILL $server $login $squatter 2>/dev/null' EXIT
for _ in $(seq 1 600); do grep -q "listening on" "$scratch/server.out" && break; sleep 0.05; done
url=$(awk '/listening on/ {print $3}' "$scratch/server.out")
"$devtrust" init --backend software -q
"$devtrust" login --browser --no-browser --server "$url" --client-id devtrust-app --timeout 120 2> "$scratch/login.err" &
login=$!
for _ in $(seq 1 600); do grep -q "Waiting up to" "$scratch/login.err" && break; sleep 0.05; done
authorize=$(grep -o "$url/oauth2/authorize?[^ ]*" "$scratch/login.err")
kill -STOP $login
# mallory's code for this sign-in: the server sends it to the listener with this sign-in's state.
callback=$(curl -s -o /dev/null -w '%{redirect_url}' -H 'Cookie: reference-user=mallory@example.com' "$authorize")
port=$(echo "$callback" | sed -E 's#^http://127\.0\.0\.1:([0-9]+)/.*#\1#')
target=$(echo "$callback" | sed -E 's#^http://127\.0\.0\.1:[0-9]+##')
sender_port=$(/usr/bin/python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
setpriv --reuid=65534 --regid=65534 --clear-groups /usr/bin/python3 -c "
import socket
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1); s.bind(('127.0.0.1', $sender_port))
s.connect(('127.0.0.1', $port)); s.sendall(b'GET $target HTTP/1.1\r\nHost: 127.0.0.1:$port\r\n\r\n'); s.close()"
# Until the sender's socket is gone (no line of its port in /proc/net/tcp but devtrust's own end).
hex=$(printf '%04X' "$sender_port")
for _ in $(seq 1 600); do
  [ "$(awk -v p=":$hex" '$2 ~ p"$"' /proc/net/tcp | wc -l)" = 0 ] && break
  sleep 0.05
done
# A program of the user's now listens on the sender's port.
/usr/bin/python3 -c "
import socket, time
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1); s.bind(('127.0.0.1', $sender_port)); s.listen(1)
open('$scratch/listening', 'w').write('yes'); time.sleep(60)" &
squatter=$!
for _ in $(seq 1 600); do [ -e "$scratch/listening" ] && break; sleep 0.05; done
kill -CONT $login
# devtrust accepts the waiting connection now: it takes the callback, or refuses it and waits on.
for _ in $(seq 1 600); do
  if ! kill -0 $login 2>/dev/null; then echo "outcome: taken"; break; fi
  if grep -q "whose owner the system could not name" "$scratch/login.err"; then echo "outcome: refused"; break; fi
  sleep 0.05
done
cat "$scratch/login.err" >&2

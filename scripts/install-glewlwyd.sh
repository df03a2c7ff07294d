#!/bin/sh
# Installs Debian's glewlwyd (the real OpenID provider the sign-in tests run
# against) without letting its package configure a database or start the
# system service (which would take port 4593). Root only; otherwise prints
# what to run.
set -eu
if dpkg-query -W -f='${Status}' glewlwyd 2>/dev/null | grep -q "install ok installed"; then exit 0; fi
if [ "$(id -u)" -ne 0 ]; then
    echo "devtrust: the sign-in tests need glewlwyd; as root run: $0" >&2
    exit 1
fi
echo "devtrust: installing glewlwyd (test peer)" >&2
echo "glewlwyd glewlwyd/config_type select No configuration" | debconf-set-selections
created_policy=0
if [ ! -e /usr/sbin/policy-rc.d ]; then
    printf '#!/bin/sh\nexit 101\n' > /usr/sbin/policy-rc.d
    chmod +x /usr/sbin/policy-rc.d
    created_policy=1
fi
export DEBIAN_FRONTEND=noninteractive
apt-get install -y -qq --no-install-recommends glewlwyd dbconfig-no-thanks >/dev/null || {
    apt-get update -qq
    apt-get install -y -qq --no-install-recommends glewlwyd dbconfig-no-thanks >/dev/null
}
[ "$created_policy" = 1 ] && rm -f /usr/sbin/policy-rc.d
exit 0

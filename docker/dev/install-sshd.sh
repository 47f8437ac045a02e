# ssh target: OpenSSH server. Its postinst generates host keys; they are deleted in this same layer, so
# no image layer ever holds a private host key (each container makes its own at first start).
# shellcheck shell=bash
set -euo pipefail
apt_opts=()
if [ -s /run/secrets/ca ]; then apt_opts=(-o Acquire::https::CAInfo=/run/secrets/ca); fi
apt-get "${apt_opts[@]}" update
apt-get "${apt_opts[@]}" install -y --no-install-recommends openssh-server
rm -f /etc/ssh/ssh_host_*_key /etc/ssh/ssh_host_*_key.pub
rm -rf /var/lib/apt/lists/* /var/cache/apt/archives/*.deb
usermod -p '*' dev   # no password, and not "locked" (sshd would refuse a locked account's key logins)
install -d -m 700 -o dev -g dev /var/lib/envcheck/ssh-host-keys
install -d -o dev -g dev /home/dev/.cache

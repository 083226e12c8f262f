"""Stand-in for ansible-test's pip bootstrap script (get-pip-<version>.py), which ansible-test downloads from
ci-files.testing.ansible.com: that host is not reachable from every build machine, the package index is.

ansible-test runs this file as ``__main__`` inside a fresh virtual environment with the arguments it would give
get-pip.py (``--disable-pip-version-check pip==X [--no-setuptools] [--no-wheel]``). It installs the pip bundled
with Python (ensurepip), then the requested packages from the configured package index, as get-pip.py would.
``make sanity`` copies it to ~/.ansible/test/cache/get_pip_<version>.py, where ansible-test looks first.
"""
import ensurepip
import os
import subprocess
import sys

SKIP = {"--no-setuptools", "--no-wheel"}
# ansible-test runs this with a reduced environment; the pip that ensurepip bundles then ignores the site's `cert`
# setting, so name the system CA bundle (where a TLS-intercepting proxy's CA is installed) the way requests reads it.
SYSTEM_CA = "/etc/ssl/certs/ca-certificates.crt"

env = dict(os.environ)
if "REQUESTS_CA_BUNDLE" not in env and os.path.exists(SYSTEM_CA):
    env["REQUESTS_CA_BUNDLE"] = SYSTEM_CA
ensurepip.bootstrap(upgrade=True)
args = [a for a in sys.argv[1:] if a not in SKIP]
sys.exit(subprocess.call([sys.executable, "-m", "pip", "install", "--upgrade", *args], env=env))

# SPDX-License-Identifier: Apache-2.0
"""Offline stand-in for the get-pip bootstrap script that ansible-test downloads into its sanity virtualenvs.

ansible-test fetches ``get-pip-<version>.py`` from its CI file server, which a site that reaches only a
package index cannot. `make sanity` puts this script where ansible-test caches that download
(``~/.ansible/test/cache/get_pip_<version>.py`` under the sanity run's own HOME): it installs the bundled
pip with ``ensurepip``, then the requested packages (``pip==<version>``) from the configured package index.
ansible-test runs it as ``python get_pip.py [pip options] PACKAGES... --no-setuptools --no-wheel``.
"""

from __future__ import annotations

import subprocess
import sys

IGNORED = {"--no-setuptools", "--no-wheel"}  # get-pip.py options, not pip's


def main(argv: list[str]) -> int:
    # In a child: ensurepip.bootstrap() would set PIP_CONFIG_FILE=/dev/null here, hiding the site's pip configuration
    # (index, certificates) from the install below.
    subprocess.check_call([sys.executable, "-m", "ensurepip"])
    return subprocess.call([sys.executable, "-m", "pip", "install", *(a for a in argv if a not in IGNORED)])


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))

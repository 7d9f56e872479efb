"""``python -m sb3_grpo plugins``: the same as the ``sb3-grpo`` command (see :mod:`sb3_grpo.cli`)."""

import sys

from sb3_grpo.cli import main

if __name__ == "__main__":
    sys.exit(main())

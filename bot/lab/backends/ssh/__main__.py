"""``python -m bot.lab.backends.ssh worker RUN_DIR``: the worker of one ssh run."""

import sys

from bot.lab.backends.ssh.worker import main

sys.exit(main())

"""``python -m bot.lab.backends.lava prepare RUN_DIR``: the preparer of one lava run."""

import sys

from bot.lab.backends.lava.prepare import main

sys.exit(main())

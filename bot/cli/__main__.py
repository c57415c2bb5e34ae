"""``python -m bot.cli``: the same as the ``regtriage`` console script."""

from bot.cli.main import main

main()

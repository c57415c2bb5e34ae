"""regtriage: regression triage bot for the Linux kernel mailing lists."""

__version__ = "0.1.0"

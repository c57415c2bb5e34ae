"""Replies on the lists: the bot's threaded reply to a regression report (policy, composing,
outbox, sending)."""

"""Chat notifications and chat queries: IRC (pydle) and Matrix (matrix-nio).

Pure parts (no I/O):

* :mod:`bot.notify.notifiers` -- the registry of notifier kinds: built-in
  (:mod:`bot.notify.irc_notifier`, :mod:`bot.notify.matrix_notifier`: settings, message
  bodies, the adapter) and from the ``regtriage.notifiers`` entry points.
* :mod:`bot.notify.settings` -- ``[notify]``, ``[[notify.<kind>]]`` (each parsed by its
  notifier), ``[[notify.route]]`` and ``[chat]`` of the config, validated; secrets are read from
  the environment or a file only when connecting, and never kept in a printable field.
* :mod:`bot.notify.routing` -- event names, which targets an event on a record goes to.
* :mod:`bot.notify.format` -- the short IRC line, the Matrix plain + HTML bodies, chat answers.
* :mod:`bot.notify.chat` -- chat command parsing, token buckets, the admin allow-list.

I/O:

* :mod:`bot.notify.outbox` -- the durable outbox (table ``notifications``; its queries in
  storage/notifications.py): :func:`~bot.notify.outbox.enqueue_event`, tracker transitions
  announced (:func:`~bot.notify.outbox.announce`, :func:`~bot.notify.outbox.scan_tracker`).
* :mod:`bot.notify.deliver` -- delivering it: :func:`~bot.notify.deliver.deliver_pending`, and the
  async :class:`~bot.notify.deliver.Deliverer` a long-running service keeps.
* :mod:`bot.notify.irc`, :mod:`bot.notify.matrix` -- adapters with async ``start()``,
  ``stop()``, ``send()`` and ``on_command()``.
* :mod:`bot.notify.responder` -- answers chat commands; :class:`~bot.notify.responder.ChatActions`
  is the interface for the state-changing ones (``resolve``, ``rerun``).
* :mod:`bot.cli.notify` -- ``regtriage notify`` (``register(main)``).
"""

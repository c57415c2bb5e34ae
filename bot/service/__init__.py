"""``regtriage run``: the long-running bot (``run``), its optional parts attached when configured
(``hooks``: lab scheduler, notifications) and the notification loop (``notify``)."""

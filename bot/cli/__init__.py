"""The command line, a thin layer over the pipeline stages: ``main`` (the ``regtriage`` group,
ingest, threads, show, ...), one module per stage's commands (tracker, reply, lab, notify, web)
and ``tools`` (JSON and rich table output shared by them)."""

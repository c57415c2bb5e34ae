"""The read-only web dashboard and JSON API (``app``), its server-rendered plots (``svg``) and
the Prometheus metrics it serves (``metrics``)."""

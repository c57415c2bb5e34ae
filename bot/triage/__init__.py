"""Triage: run the pure extractors (``extractors/``) over stored mail. ``runner`` finds the
messages not yet triaged and extracts them (in a pool of worker processes for large batches);
``extraction`` is the glue for ``regtriage extract`` on files."""

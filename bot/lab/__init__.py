"""The lab: inventory, matching, backends, statistics and scheduling of confirmation reruns."""

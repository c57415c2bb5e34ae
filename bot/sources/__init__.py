"""Where mail comes from: local files, lore / public-inbox over HTTP, public-inbox git epochs."""

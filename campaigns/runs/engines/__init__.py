"""Transfer engines: they move bytes and report one CopyResult per attempt."""

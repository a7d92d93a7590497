"""The gfal2 engine: copies (and checksum requests) made by gfal2 in the driving worker's copy
threads or on a client pool's hosts. Registered by `engine` (campaigns.apps.ENGINE_MODULES)."""

"""The FTS engine: copies made by an FTS3 server, submitted, polled and recorded by StorageOps
(docs/fts.md). Registered by `engine` (campaigns.apps.ENGINE_MODULES)."""

"""The FTS engine: copies made by an FTS3 server, submitted, polled and recorded by StorageOps
(docs/fts.md). A Django app of its own (`apps.FtsConfig`,
label "fts"): its ready() registers the engine (`engine`) and its verdict notes; its models,
admin, API and drive task are here."""

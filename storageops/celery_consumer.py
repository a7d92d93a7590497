"""The worker's consumer, riding through a lost broker instead of exiting.

Celery 5.7's consumer, when the broker's connection breaks, first drains what is left
(``connection.collect()``, which releases the transport and leaves the channels without
their client) and then closes the connection; closing a Redis channel with messages still
unacknowledged restores them through that client, which is gone: AttributeError, which
``ignore_errors`` does not ignore, and the worker exits ("Unrecoverable error: AttributeError
... 'hostname'") rather than reconnecting. Seen on every Redis SIGKILL of the soak
(benchmarks/soak.py). The messages it would restore point at runs the database holds, and
recover_runs finds those again; what matters is that the worker stays up and reconnects.
"""

from __future__ import annotations

import logging

from celery.worker.consumer import Consumer

log = logging.getLogger(__name__)


class SturdyConsumer(Consumer):
    def on_connection_error_after_connected(self, exc: Exception) -> None:
        connection = self.connection
        if connection is not None:
            close = connection.close

            def close_released() -> None:
                try:
                    close()
                except AttributeError as error:  # the channel's client went with collect()
                    log.warning("broker connection closed with its client already released (%s)", error)

            connection.close = close_released
        super().on_connection_error_after_connected(exc)

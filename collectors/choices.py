"""Enumerations of the collectors app."""

from django.db import models


class HostRole(models.TextChoices):
    DOOR = "door", "Door / gateway"
    POOL = "pool", "Pool / data server"
    OSS = "oss", "Lustre OSS"
    MDS = "mds", "Metadata server"
    CLIENT = "client", "Client (runs copies for campaigns)"
    OTHER = "other", "Other"


class EventKind(models.TextChoices):
    CONFIG_CHANGE = "config_change", "Config change"
    SERVICE_RESTART = "service_restart", "Service restart"
    # A watched daemon stopped by a signal (SIGSTOP): alive, holding its port, answering nothing.
    SERVICE_HUNG = "service_hung", "Service hung"
    # A watched data filesystem with (almost) no room left: one event, given its end when room comes back.
    DISK_FULL = "disk_full", "Disk full"
    REBOOT = "reboot", "Reboot"
    LOG_BURST = "log_burst", "Log burst"
    NOTE = "note", "Note"
    DEPLOY = "deploy", "Deploy"
    RUN_START = "run_start", "Run start"
    RUN_END = "run_end", "Run end"
    FTS_CONFIG = "fts_config", "FTS config change"
    SCHEDULE = "schedule", "Scheduler decision"
    # What a run rode through: a resume after its driver died, a lost lease, a crash, a
    # database outage, a stall. On the run's charts like any event; not a disturbance of the
    # storage (the storage did not change), so never trimmed around.
    RUN_INCIDENT = "run_incident", "Run incident"
    # A StorageOps worker (or a pool process of one) that died without shutting down: what it
    # drove is resumed elsewhere; not a disturbance of the storage.
    WORKER_LOST = "worker_lost", "Worker lost"


# Kinds whose minutes are left out when an analysis trims around disturbances.
DISTURBING_KINDS = (
    EventKind.CONFIG_CHANGE, EventKind.SERVICE_RESTART, EventKind.SERVICE_HUNG, EventKind.DISK_FULL, EventKind.REBOOT,
    EventKind.DEPLOY,
)  # fmt: skip


class EventSource(models.TextChoices):
    COLLECTOR = "collector", "Collector"
    OPERATOR = "operator", "Operator"
    API = "api", "API"
    STORAGEOPS = "storageops", "StorageOps"

"""The campaigns app's models: definitions (what is tested), records (what happened),
schedules. An engine's own models are in its app (campaigns.runs.engines.fts.models)."""

from campaigns.models.buckets import TransferBucket
from campaigns.models.campaign_rules import file_size_error
from campaigns.models.definitions import (
    Backend,
    Campaign,
    Endpoint,
    default_concurrency_steps,
    validate_absolute_path,
    validate_concurrency_steps,
    validate_file_mix,
)
from campaigns.models.readiness import ReadinessCheck, ReadinessGrid
from campaigns.models.records import Run, RunChart, RunStep, Transfer
from campaigns.models.schedules import (
    SCHEDULE_SETTINGS,
    WEEKDAYS,
    CampaignSchedule,
    parse_weekdays,
    validate_cron,
    validate_time_zone,
    validate_weekdays,
)
from campaigns.models.token_issuers import TokenIssuer

__all__ = [
    "SCHEDULE_SETTINGS",
    "WEEKDAYS",
    "Backend",
    "Campaign",
    "CampaignSchedule",
    "Endpoint",
    "ReadinessCheck",
    "ReadinessGrid",
    "Run",
    "RunChart",
    "RunStep",
    "TokenIssuer",
    "Transfer",
    "TransferBucket",
    "default_concurrency_steps",
    "file_size_error",
    "parse_weekdays",
    "validate_absolute_path",
    "validate_concurrency_steps",
    "validate_cron",
    "validate_file_mix",
    "validate_time_zone",
    "validate_weekdays",
]

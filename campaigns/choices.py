"""Enumerations of the campaigns app: the vocabulary runs, transfers and forms share."""

from django.db import models


class AccessLayer(models.TextChoices):
    XROOTD = "xrootd", "XRootD"
    DCACHE = "dcache", "dCache"
    EOS = "eos", "EOS"
    STORM = "storm", "StoRM"
    ECHO = "echo", "XRootD/Ceph (Echo)"
    OTHER = "other", "Other"


class CampaignKind(models.TextChoices):
    TRANSFER = "transfer", "Transfers"
    CHECKSUM_LOAD = "checksum_load", "Checksum load"


class Direction(models.TextChoices):
    FORWARD = "forward", "Sources → destinations"
    REVERSE = "reverse", "Destinations → sources"
    BOTH = "both", "Both ways, alternating"


class TpcMode(models.TextChoices):
    AUTO = "auto", "Plugin default"
    PULL = "pull", "Third-party pull"
    PUSH = "push", "Third-party push"
    STREAMED = "streamed", "Streamed through the client"


class ChecksumMode(models.TextChoices):
    NONE = "none", "None"
    SOURCE = "source", "Source only"
    TARGET = "target", "Target only"
    BOTH = "both", "Source and target"


class ChecksumAlgorithm(models.TextChoices):
    ADLER32 = "adler32", "adler32"
    CRC32 = "crc32", "crc32"
    MD5 = "md5", "md5"


class StepBarrier(models.TextChoices):
    DRAIN = "drain", "Drain: the next step starts when the last one's copies have ended"
    NONE = "none", "None: the next step's copies start as the last one's finish (long soak runs)"


class Cleanup(models.TextChoices):
    KEEP = "keep", "Keep the files"
    DELETE = "delete", "Delete the run's files at its end"


class ScheduleKind(models.TextChoices):
    CRON = "cron", "Cron expression"
    INTERVAL = "interval", "Every N minutes"


class RunState(models.TextChoices):
    PENDING = "pending", "Pending"
    RUNNING = "running", "Running"
    CANCELLING = "cancelling", "Cancelling"
    SUCCEEDED = "succeeded", "Succeeded"
    # Finished short of what it needed: copies failed, files never tried (a budget) or a planned
    # step that never ran. The pool a time-bounded sweep's steps never reached is no shortfall.
    PARTIAL = "partial", "Partial"
    FAILED = "failed", "Failed"
    CANCELLED = "cancelled", "Cancelled"


class BaselineChoice(models.TextChoices):
    """Whether a finished run may be in the baseline later runs of its campaign are judged against."""

    AUTO = "auto", "By the rule: succeeded, undisturbed, not a retry"
    INCLUDE = "include", "Included by an operator (a partial or disturbed run known to be sound)"
    EXCLUDE = "exclude", "Left out by an operator (a night known to be unrepresentative)"
    # After a real, intended change (new disks, a new door): later runs are judged against this
    # run and those after it only, the level before it no longer being the door's.
    NEW_NORMAL = "accepted", "Accepted as the new normal: later baselines start at this run"


ACTIVE_RUN_STATES = (RunState.PENDING, RunState.RUNNING, RunState.CANCELLING)
FINAL_RUN_STATES = (RunState.SUCCEEDED, RunState.PARTIAL, RunState.FAILED, RunState.CANCELLED)


class RunTrigger(models.TextChoices):
    WEB = "web", "Web"
    API = "api", "API"
    COMMAND = "command", "Command"
    SCHEDULE = "schedule", "Schedule"
    DEMO = "demo", "Demo site"


class TransferState(models.TextChoices):
    QUEUED = "queued", "Queued"
    ACTIVE = "active", "Active"
    SUCCEEDED = "succeeded", "Succeeded"
    FAILED = "failed", "Failed"
    CANCELLED = "cancelled", "Cancelled"
    # Never started: a budget, a stop, a cancel before it began. One that had started is CANCELLED.
    SKIPPED = "skipped", "Skipped (never started)"


class ErrorCategory(models.TextChoices):
    NONE = "", "None"
    CHECKSUM_MISMATCH = "checksum_mismatch", "Checksum mismatch"
    CHECKSUM_TIMEOUT = "checksum_timeout", "Checksum timeout"
    TRANSFER_TIMEOUT = "transfer_timeout", "Transfer timeout"
    HTTP_5XX = "http_5xx", "HTTP 5xx"
    TPC_FAILURE = "tpc_failure", "TPC failure"
    CONNECTION_REFUSED = "connection_refused", "Connection refused"
    DNS = "dns", "Host name not resolved (DNS)"
    NO_SPACE = "no_space", "No space"
    PERMISSION_DENIED = "permission_denied", "Permission denied"
    NOT_FOUND = "not_found", "Not found"
    FILE_EXISTS = "file_exists", "File exists"
    CANCELLED = "cancelled", "Cancelled"
    # The engine ran the copy in another mode than the campaign asked (e.g. a third-party copy
    # for a streamed one): its figures would measure the wrong thing, so the copy is failed.
    MODE_NOT_HONOURED = "mode_not_honoured", "Copy mode not honoured"
    OTHER = "other", "Other"


# Failures another attempt may cure (a door restarting, an overloaded gateway, a network
# hiccup); a missing file, a refused permission, a full disk or a wrong checksum will fail the
# same way again, and a cancel was asked for.
RETRYABLE_ERRORS = frozenset(
    {
        ErrorCategory.TRANSFER_TIMEOUT,
        ErrorCategory.CHECKSUM_TIMEOUT,
        ErrorCategory.HTTP_5XX,
        ErrorCategory.TPC_FAILURE,
        ErrorCategory.CONNECTION_REFUSED,
        ErrorCategory.DNS,  # a resolver's hiccup passes; a wrong name fails the same way again
        ErrorCategory.OTHER,
    }
)


class SourceListing(models.TextChoices):
    NONE = "", "No: named files below the source path (generated or already there)"
    FOLDER = "folder", "Every file in the source path, listed when a run starts"
    URLS = "urls", "A list of URLs"

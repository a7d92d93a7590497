"""Forms of the campaigns app: a campaign and its schedule. The model validates every knob
(field validators and Campaign.clean); these fields only turn what a person types into the
model's values, and say in a sentence what they could not read."""

from __future__ import annotations

import copy
from collections.abc import Callable

from django import forms
from django.core.exceptions import NON_FIELD_ERRORS

from campaigns import editing, sweeps
from campaigns.choices import BaselineChoice
from campaigns.models import (
    SCHEDULE_SETTINGS,
    Campaign,
    CampaignSchedule,
    Endpoint,
    Run,
    engine_registry,
    file_size_error,
)
from collectors.choices import HostRole
from collectors.models import Host
from storageops import paths
from storageops.units import parse_size
from storageops.validators import MAX_ROW_ID


def column_size_error(size: int) -> str:
    """Why `size` bytes cannot be kept (more than a bigint column holds), or ""."""
    return f"At most {MAX_ROW_ID:,} bytes; got {size:,}." if size > MAX_ROW_ID else ""


class SizeField(forms.CharField):
    """Bytes typed as 100 MB, 9 GB or 1000000, read exactly. A size past what the field may take
    is refused here in one sentence with both figures, by `limit` (the model's own rule, where
    it has one) or by the column's range: left to the model, the column's validator and the
    model's rule would each say it, the one in other words than the other."""

    def __init__(self, *args, limit: Callable[[int], str] | None = None, **kwargs) -> None:
        self.limit = limit
        super().__init__(*args, **kwargs)

    def to_python(self, value):
        value = super().to_python(value)
        if value in self.empty_values:
            return None
        try:
            size = parse_size(value)
        except ValueError as exc:
            raise forms.ValidationError(str(exc)) from None
        if problem := (self.limit(size) if self.limit else "") or column_size_error(size):
            raise forms.ValidationError(problem)
        return size

    def prepare_value(self, value):
        if isinstance(value, int) and value and value % 1000**2 == 0:
            return f"{value // 1000**2} MB" if value < 1000**3 or value % 1000**3 else f"{value // 1000**3} GB"
        return value


class ConcurrencyStepsField(forms.CharField):
    """One concurrency, or a sweep written as 1, 2, 4, 8."""

    def to_python(self, value):
        value = super().to_python(value)
        if value in self.empty_values:
            return None
        parts = [p.strip() for p in value.replace(";", ",").split(",") if p.strip()]
        try:
            return [int(p) for p in parts]
        except ValueError:
            raise forms.ValidationError(
                "Write whole numbers separated by commas, e.g. 1, 2, 4, 8 (got %(value)r).", params={"value": value}
            ) from None

    def prepare_value(self, value):
        return ", ".join(str(v) for v in value) if isinstance(value, list) else value


class FileMixField(forms.CharField):
    """A file mix, one "count x size" a line, e.g. "9000 x 9 GB"."""

    widget = forms.Textarea(attrs={"rows": 3})

    def to_python(self, value):
        value = super().to_python(value)
        if value in self.empty_values:
            return []
        mix = []
        for n, line in enumerate(value.splitlines(), 1):
            if not line.strip():
                continue
            count, sep, size = line.replace("×", "x").partition("x")
            if not sep:
                raise forms.ValidationError("Line %(n)s: write count x size, e.g. 9000 x 9 GB.", params={"n": n})
            try:
                mix.append({"count": int(count.strip().replace(",", "")), "size": parse_size(size)})
            except ValueError as exc:
                raise forms.ValidationError("Line %(n)s: %(err)s", params={"n": n, "err": exc}) from None
        return mix

    def prepare_value(self, value):
        if isinstance(value, list):
            return "\n".join(f"{item.get('count')} x {item.get('size')}" for item in value if isinstance(item, dict))
        return value


class SweepField(forms.CharField):
    """Other knobs to step through, one axis a line: "streams: 1, 4, 8", "tcp_buffer_size: 0, 4 MB"."""

    widget = forms.Textarea(attrs={"rows": 2, "placeholder": "streams: 1, 4, 8"})

    def to_python(self, value):
        value = super().to_python(value)
        if value in self.empty_values:
            return {}
        sweep: dict[str, list] = {}
        for n, line in enumerate(value.splitlines(), 1):
            if not line.strip():
                continue
            axis, sep, values = line.partition(":")
            axis = axis.strip()
            if not sep or axis not in sweeps.AXES:
                raise forms.ValidationError(
                    "Line %(n)s: write axis: values, the axis one of %(axes)s (e.g. streams: 1, 4, 8).",
                    params={"n": n, "axes": ", ".join(sweeps.AXES)},
                )
            parts = [p.strip() for p in values.split(",") if p.strip()]
            try:
                sweep[axis] = [p if axis == "tpc_mode" else _whole(p, axis) for p in parts]
            except ValueError as exc:
                raise forms.ValidationError("Line %(n)s: %(err)s", params={"n": n, "err": exc}) from None
        return sweep

    def prepare_value(self, value):
        if isinstance(value, dict):
            return "\n".join(f"{axis}: {', '.join(str(v) for v in values)}" for axis, values in value.items())
        return value


def _whole(text: str, axis: str) -> int:
    return parse_size(text) if axis in ("tcp_buffer_size", "file_size") else int(text)


URL_LIST_UPLOAD_MAX = 2 * 1024 * 1024


class CampaignForm(editing.CampaignRelationRules, forms.ModelForm):
    sources = forms.ModelMultipleChoiceField(
        Endpoint.objects.select_related("backend"), widget=forms.CheckboxSelectMultiple,
        help_text="Where files are read from.",
    )  # fmt: skip
    destinations = forms.ModelMultipleChoiceField(
        Endpoint.objects.select_related("backend"), widget=forms.CheckboxSelectMultiple, required=False,
        help_text="Where files are written to (a transfer campaign needs at least one).",
    )  # fmt: skip
    clients = forms.ModelMultipleChoiceField(
        Host.objects.filter(role=HostRole.CLIENT), widget=forms.CheckboxSelectMultiple, required=False,
        help_text="Client hosts that share each step's copies, each running `manage.py client --host NAME`; "
        "none: the worker that drives the run copies them all.",
    )  # fmt: skip
    file_size = SizeField(initial="100 MB", help_text="e.g. 100 MB, 9 GB or 1000000 (bytes).", limit=file_size_error)
    file_mix = FileMixField(
        required=False, help_text="Overrides count × size: one line each, e.g. 9000 x 9 GB then 6000 x 4 GB."
    )
    max_bytes = SizeField(required=False, label="Byte budget", help_text="Stop cleanly after this much, e.g. 10 TB.")
    max_bytes_per_day = SizeField(
        required=False, label="Daily byte budget",
        help_text="All runs of this campaign together, per day in the site's time zone, e.g. 10 TB.",
    )  # fmt: skip
    max_bytes_per_week = SizeField(
        required=False, label="Weekly byte budget", help_text="The same per ISO week (Monday to Sunday)."
    )
    concurrency_steps = ConcurrencyStepsField(
        initial="1", help_text="One value for a fixed concurrency, several for a sweep, e.g. 1, 2, 4, 8."
    )
    sweep = SweepField(
        required=False,
        help_text="Also step through other knobs, each value at every concurrency step, one axis a line: "
        "streams: 1, 4, 8 (axes: file_size, tpc_mode, tcp_buffer_size, streams; two or more make a matrix; "
        "a file-size sweep, e.g. file_size: 1 MB, 100 MB, needs steps bounded by files).",
    )

    class Meta:
        model = Campaign
        fields = [
            "name", "description", "kind", "engine", "sources", "destinations", "clients", "source_path",
            "destination_path",
            "create_sources", "source_listing", "source_urls", "file_count", "file_size", "file_mix",
            "source_file_count", "direction", "tpc_mode",
            "checksum_mode", "checksum_algorithm", "streams", "tcp_buffer_size", "timeout", "overwrite",
            "create_parent", "retries", "retry_delay", "concurrency_steps", "sweep", "step_seconds", "step_files",
            "step_barrier", "start_together", "max_bytes",
            "max_duration", "cancel_grace", "max_bytes_per_day", "max_bytes_per_week", "allow_overlap", "cleanup",
            "target_rate_bps", "regression_threshold",
        ]  # fmt: skip
        widgets = {
            "description": forms.Textarea(attrs={"rows": 2}),
            "source_urls": forms.Textarea(
                attrs={"rows": 4, "placeholder": "root://door1.example.org:1094//atlas/data/file1"}
            ),
        }

    SECTIONS = (
        ("What", ("name", "description", "kind", "engine")),
        ("Where", ("sources", "destinations", "direction", "source_path", "destination_path")),
        ("Files", ("file_count", "file_size", "file_mix", "create_sources", "source_file_count", "source_listing",
                   "source_urls", "source_urls_file")),
        ("How each copy is made", ("tpc_mode", "checksum_mode", "checksum_algorithm", "streams", "tcp_buffer_size",
                                   "timeout", "retries", "retry_delay", "overwrite", "create_parent")),
        ("Concurrency and sweeps", ("concurrency_steps", "sweep", "step_seconds", "step_files", "step_barrier",
                                    "start_together", "clients")),
        ("Budgets and stopping", ("max_bytes", "max_duration", "cancel_grace", "max_bytes_per_day",
                                  "max_bytes_per_week", "allow_overlap", "cleanup")),
        # Each engine's options (engine_options), one field each, named <engine>_<option>.
        *((f"{e.label} (engine {e.label} only)", tuple(f"{e.name}_{n}" for n in e.options_form.base_fields))
          for e in engine_registry.registered() if e.options_form),
        ("Verdict", ("target_rate_bps", "regression_threshold")),
    )  # fmt: skip

    source_urls_file = forms.FileField(
        label="or upload the URL list", required=False,
        help_text="A text file, one URL a line (at most 2 MB); it replaces the list above.",
    )  # fmt: skip

    def clean_regression_threshold(self) -> int:
        value = self.cleaned_data.get("regression_threshold")
        return Campaign._meta.get_field("regression_threshold").get_default() if value is None else value

    def clean_source_urls_file(self) -> str | None:
        upload = self.cleaned_data.get("source_urls_file")
        if not upload:
            return None
        if upload.size > URL_LIST_UPLOAD_MAX:
            raise forms.ValidationError(f"The file is {upload.size:,} bytes: at most {URL_LIST_UPLOAD_MAX:,}.")
        try:
            return upload.read().decode("utf-8")
        except UnicodeDecodeError:
            raise forms.ValidationError("The file is not UTF-8 text: one URL a line.") from None

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        # Left empty (a script that never heard of the watch), the threshold is the model's default.
        self.fields["regression_threshold"].required = False
        options = self.instance.engine_options or {}
        for name in _option_fields(self.instance.engine):
            self.initial.setdefault(name, options.get(_OPTION_KEYS[name]))

    def fieldsets(self) -> list[tuple[str, list]]:
        """The fields in the groups the page shows them in (every field exactly once)."""
        return [(title, [self[name] for name in names]) for title, names in self.SECTIONS]

    def clean(self):
        data = super().clean()
        if data.get("source_urls_file"):
            data["source_urls"] = data["source_urls_file"]  # the model's validators check it, as if pasted
        self._clean_engine_options(data.get("engine", ""))
        return data

    def _clean_engine_options(self, engine: str) -> None:
        """The chosen engine's fields, checked by its options schema, become engine_options."""
        if not any(e.name == engine for e in engine_registry.registered()):
            return  # the engine field says what is wrong
        entry = engine_registry.engine(engine)
        if entry.options_form is None:
            self.instance.engine_options = {}
            return
        raw = {_OPTION_KEYS[name]: self.data.get(self.add_prefix(name)) for name in _option_fields(engine)}
        options = entry.options_form(data={k: v for k, v in raw.items() if v not in (None, "")})
        if options.is_valid():
            self.instance.engine_options = options.as_options()
        for key, messages in options.errors.items():
            for message in messages:
                self.add_error(f"{engine}_{key}" if f"{engine}_{key}" in self.fields else None, message)

    def _update_errors(self, errors) -> None:
        # engine_options is shown as each engine's own fields, which the form checked with the
        # same schema: the model's word on it is said there already, or else on top.
        if hasattr(errors, "error_dict") and "engine_options" in errors.error_dict:
            said = errors.error_dict.pop("engine_options")
            if not any(self.has_error(name) for name in _OPTION_FIELDS):
                errors.error_dict.setdefault(NON_FIELD_ERRORS, []).extend(said)
        super()._update_errors(errors)


def _option_fields(engine: str) -> list[str]:
    return [name for name in CampaignForm.base_fields if name.startswith(f"{engine}_") and name in _OPTION_FIELDS]


# Every engine's options as fields of the campaign form, named <engine>_<option>; none is required
# by the form itself: the chosen engine's options schema says what it needs.
_OPTION_FIELDS = {}
_OPTION_KEYS: dict[str, str] = {}  # a form field's name -> its option's name in engine_options
for _entry in engine_registry.registered():
    for _name, _field in _entry.options_form.base_fields.items() if _entry.options_form else ():
        _copy = copy.deepcopy(_field)
        _copy.required = False
        _OPTION_FIELDS[f"{_entry.name}_{_name}"] = _copy
        _OPTION_KEYS[f"{_entry.name}_{_name}"] = _name
CampaignForm.base_fields.update(_OPTION_FIELDS)
CampaignForm.declared_fields.update(_OPTION_FIELDS)


class CloneForm(forms.Form):
    name = forms.CharField(max_length=100, help_text="The new campaign's name.")


class CompareForm(forms.Form):
    """Which runs to put side by side, and what to trim from each."""

    runs = forms.CharField(required=False, help_text="Run ids, e.g. 12, 15 (2 to 8 of them).", widget=forms.TextInput())
    campaign = forms.ModelChoiceField(
        Campaign.objects.all(), required=False, empty_label="—",
        help_text="Or: the latest finished run of each backend of this campaign.",
    )  # fmt: skip
    warmup = forms.FloatField(
        required=False, min_value=0, max_value=7 * 86400, label="Leave out the first (s)",
        help_text="Warm-up: copies that started this soon after the run began.",
    )  # fmt: skip
    tail = forms.FloatField(
        required=False, min_value=0, max_value=7 * 86400, label="Leave out the last (s)",
        help_text="Tail: copies that ended this close to the run's end.",
    )  # fmt: skip
    margin = forms.FloatField(
        required=False, min_value=0, max_value=86400, label="Leave out around events (s)",
        help_text="Seconds before and after each restart or config change: copies overlapping them are left out.",
    )  # fmt: skip
    x = forms.ChoiceField(
        choices=[("concurrency", "concurrency"), *((a, sweeps.AXIS_LABELS[a]) for a in sweeps.AXES)],
        required=False, initial="concurrency", label="Steps against",
        help_text="The x axis of the steps chart: the concurrency, or a knob the runs sweep or differ in.",
    )  # fmt: skip

    def clean_x(self) -> str:
        return self.cleaned_data.get("x") or "concurrency"

    def __init__(self, data=None, *args, **kwargs):
        # runs=1&runs=2 (checkboxes of the runs list) and runs=1,2 (typed) mean the same.
        if data is not None and hasattr(data, "getlist") and len(data.getlist("runs")) > 1:
            data = data.copy()
            data["runs"] = ",".join(sorted(data.getlist("runs"), key=lambda v: (len(v), v)))
        super().__init__(data, *args, **kwargs)

    def clean_runs(self) -> list[int]:
        text = self.cleaned_data["runs"]
        try:
            ids = [int(p) for p in text.replace(";", ",").replace(" ", ",").split(",") if p.strip()]
        except ValueError:
            raise forms.ValidationError("Give run ids separated by commas, e.g. 12, 15.") from None
        if ids and not 2 <= len(set(ids)) <= 8:
            raise forms.ValidationError("Pick 2 to 8 different runs (got %(n)s).", params={"n": len(set(ids))})
        return ids

    def clean(self):
        data = super().clean()
        if not self.errors and not data.get("runs") and not data.get("campaign"):
            raise forms.ValidationError("Pick 2 to 8 runs, or a campaign to compare its backends' latest runs.")
        return data


class CampaignScheduleForm(forms.ModelForm):
    class Meta:
        model = CampaignSchedule
        fields = list(SCHEDULE_SETTINGS)
        widgets = {
            "window_start": forms.TimeInput(attrs={"type": "time"}, format="%H:%M"),
            "window_end": forms.TimeInput(attrs={"type": "time"}, format="%H:%M"),
        }


class ReadinessForm(forms.Form):
    """A readiness check of one endpoint, or of a pair (then third-party copies both ways)."""

    peer = forms.ModelChoiceField(
        queryset=Endpoint.objects.exclude(url__startswith="mock:").order_by("name"),
        required=False,
        empty_label="none: this endpoint alone",
        help_text="With a peer, third-party copies in both directions in every mode the two share.",
    )

    def __init__(self, *args, endpoint: Endpoint, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.endpoint = endpoint
        self.fields["peer"].queryset = self.fields["peer"].queryset.exclude(pk=endpoint.pk)

    def clean(self):
        data = super().clean()
        # The endpoints' URLs by the path rule now: a row may predate it (the check re-checks each probe).
        for name, endpoint in (("endpoint", self.endpoint), ("peer", data.get("peer"))):
            try:
                if endpoint is not None:
                    paths.check_endpoint_url(endpoint.url)
            except forms.ValidationError as exc:
                self.add_error("peer" if name == "peer" else None, f"The {name}'s URL: {' '.join(exc.messages)}")
        return data


class ReadinessScheduleForm(forms.Form):
    """The readiness grid's daily run: on or off, and when (UTC)."""

    enabled = forms.BooleanField(required=False, label="Run the grid every day")
    daily_at = forms.TimeField(
        required=False, label="At (UTC)", input_formats=["%H:%M"], help_text="HH:MM, e.g. 06:30.",
        widget=forms.TimeInput(format="%H:%M", attrs={"type": "time"}),
    )  # fmt: skip

    def clean(self) -> dict:
        data = super().clean()
        if data.get("enabled") and data.get("daily_at") is None and "daily_at" not in self.errors:
            self.add_error("daily_at", "Give the time of day (HH:MM, UTC) the grid runs at.")
        return data


class BaselineChoiceForm(forms.Form):
    """Include a finished run in its campaign's baselines, leave it out, or leave it to the rule."""

    choice = forms.ChoiceField(choices=BaselineChoice.choices, label="Baselines")
    reason = forms.CharField(max_length=300, required=False, help_text="Why: required to include or leave out a run.")


class NewNormalForm(forms.Form):
    """Accept one of a campaign's runs as its new normal, from its page: the run and why."""

    run = forms.IntegerField(min_value=1, label="From run", widget=forms.Select)
    reason = forms.CharField(
        max_length=300, label="What changed for good",
        help_text="A new door, a firmware upgrade, a throttle the site chose: logged as a note with your name.",
    )  # fmt: skip

    def __init__(self, *args, campaign, runs=(), **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.campaign = campaign
        self.fields["run"].widget.choices = [(r.pk, new_normal_label(r)) for r in runs]

    def clean_run(self) -> Run:
        pk = self.cleaned_data["run"]
        run = Run.objects.filter(campaign=self.campaign, pk=pk).select_related("campaign").first()
        if run is None:
            raise forms.ValidationError(f"Run #{pk} is not a run of {self.campaign.name}.")
        return run


def new_normal_label(run: Run) -> str:
    """How a run reads in the new-normal choice: its number, when, and its figure and judgement."""
    total = (run.summary or {}).get("total") or {}
    judged = ((run.summary or {}).get("judgement") or {}).get("status", "")
    rate = f", {total['throughput_bps'] / 1e6:.1f} MB/s" if total.get("throughput_bps") else ""
    return f"#{run.pk} {run.created:%Y-%m-%d %H:%M}{rate}{f', {judged}' if judged else ''}"

"""'Accept as the new normal from run #N' on the campaign's page (issue 34): an operator picks a
run among those listed and says why; the run starts the baselines, the change log says who and
why, and the next run's judgement starts there. Viewers see where baselines start, no form."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from campaigns.models import Run
from campaigns.results import baselines
from collectors.models import Event
from tests.campaigns.results.test_baselines import MB, finished, judged
from tests.support.factories import mock_campaign

pytestmark = pytest.mark.django_db


@pytest.fixture
def slowed():
    """Four quiet nights, then three slowed ones each judged regressed as they ended."""
    campaign = mock_campaign("door2-nightly", file_count=100, concurrency_steps=[4])
    now = timezone.now()
    for i, d in enumerate([0, 2, -1, 1]):
        finished(campaign, now - timedelta(hours=8 - i), (100 + d) * MB)
    slow = [finished(campaign, now - timedelta(hours=3 - i), 25 * MB) for i in range(3)]
    for run in slow:
        judged(run)
    return campaign, now, slow


def messages_of(response) -> list[str]:
    return [str(m) for m in response.context["messages"]]


def test_an_operator_accepts_a_slowed_run_as_the_new_normal_from_the_campaign_page(slowed, client, operator):
    campaign, now, slow = slowed
    client.force_login(operator)
    page = client.get(campaign.get_absolute_url()).content.decode()
    assert f'action="/campaigns/{campaign.pk}/new-normal/"' in page
    assert f'<option value="{slow[0].pk}">#{slow[0].pk} ' in page and "25.0 MB/s, regressed</option>" in page
    assert "data-normal-from" not in page

    reason = "door2 stays throttled at 4 MB/s: its disks moved to the slow pool"
    response = client.post(f"/campaigns/{campaign.pk}/new-normal/", {"run": slow[0].pk, "reason": reason}, follow=True)
    assert response.redirect_chain == [(f"/campaigns/{campaign.pk}/#new-normal", 302)]
    assert messages_of(response) == [
        f"Run #{slow[0].pk} accepted as the new normal of door2-nightly: later runs are judged against it and the "
        "runs after it. A run already judged keeps its judgement until it is judged again on its page."
    ]
    slow[0].refresh_from_db()
    assert (slow[0].baseline_choice, slow[0].baseline_reason, slow[0].baseline_chosen_by) == (
        "accepted", reason, operator,
    )  # fmt: skip
    note = Event.objects.get(kind="note", run_id=slow[0].pk)
    assert note.user == operator and note.source == "operator"
    assert note.summary == f"Run #{slow[0].pk} accepted as the new normal of door2-nightly: {reason}"
    page = response.content.decode()
    assert f'data-normal-from="{slow[0].pk}"' in page and reason in page

    # The next night at the slowed level is within; one back at the old speed is improved.
    assert judged(finished(campaign, now, 25.2 * MB))["status"] == "within"
    fast = judged(finished(campaign, now + timedelta(hours=1), 100 * MB))
    assert fast["status"] == "improved" and fast["normal_from"] == slow[0].pk


@pytest.mark.parametrize(
    ("data", "error"),
    [
        ({"reason": "new door"}, "Accept as the new normal: From run: This field is required."),
        ({"run": "x", "reason": "new door"}, "Accept as the new normal: From run: Enter a whole number."),
        ({"run": "{run}", "reason": "  "}, "Accept as the new normal: What changed for good: This field is required."),
        ({"run": "{run}", "reason": "r" * 301}, "What changed for good: Ensure this value has at most 300 characters"),
        ({"run": "{other}", "reason": "new door"}, "From run: Run #{other} is not a run of door2-nightly."),
        ({"run": "{failed}", "reason": "new door"}, "Run #{failed}: Run #{failed} (failed) cannot start a baseline"),
    ],
)
def test_a_refused_acceptance_names_its_field_and_changes_nothing(slowed, client, operator, data, error):
    campaign, now, slow = slowed
    other = finished(mock_campaign("elsewhere"), now, 100 * MB)
    failed = finished(campaign, now, 0, state="failed")
    ids = {"run": slow[0].pk, "other": other.pk, "failed": failed.pk}
    client.force_login(operator)
    response = client.post(
        f"/campaigns/{campaign.pk}/new-normal/", {k: v.format(**ids) for k, v in data.items()}, follow=True
    )
    assert response.redirect_chain == [(f"/campaigns/{campaign.pk}/#new-normal", 302)]
    [message] = messages_of(response)
    assert error.format(**ids) in message, message
    assert not Run.objects.filter(baseline_choice="accepted").exists()
    assert not Event.objects.filter(kind="note").exists()


def test_a_viewer_sees_where_baselines_start_but_may_not_move_it(slowed, client, viewer, operator):
    campaign, now, slow = slowed
    client.force_login(viewer)
    assert 'id="new-normal"' not in client.get(campaign.get_absolute_url()).content.decode()
    refused = client.post(f"/campaigns/{campaign.pk}/new-normal/", {"run": slow[1].pk, "reason": "mine now"})
    assert refused.status_code == 403
    assert baselines.normal_from(finished(campaign, now, 25 * MB)) is None

    client.force_login(operator)
    client.post(f"/campaigns/{campaign.pk}/new-normal/", {"run": slow[1].pk, "reason": "firmware 2.4 everywhere"})
    client.force_login(viewer)
    page = client.get(campaign.get_absolute_url()).content.decode()
    assert f'data-normal-from="{slow[1].pk}"' in page and "firmware 2.4 everywhere" in page
    assert "<form" not in page.split('id="new-normal"', 1)[1].split("</section>", 1)[0]

"""Round trip through the client openapi-python-client generated from the
served /openapi.json: register a card, raise an expectation, report the fact
that satisfies it and read the record back, with the generated typed models
only. Prints one JSON line of what it saw; exits non-zero on any surprise.

Usage: roundtrip.py BASE_URL TOKEN AGENT_ID (the generated package,
clockwork_client, on PYTHONPATH).
"""

import datetime
import json
import sys

from clockwork_client import AuthenticatedClient, Client
from clockwork_client.api.expectations_watcher import (
    get_expectation,
    put_agent_card,
    raise_expectations,
    report_facts,
)
from clockwork_client.api.service import health
from clockwork_client.models import (
    AgentCard,
    Expectation,
    ExpectationRecord,
    ExpectationRecordState,
    Fact,
    FactsRequest,
    FactsResponse,
    Problem,
    RaiseRequest,
    RecordsResponse,
    SatisfiedBy,
    Subject,
)

EXTENSION = "https://rsaxb.com/a2a/expectations/v1"


def fail(what, resp):
    sys.exit(f"{what}: HTTP {resp.status_code}: {resp.content[:500]!r}")


def main():
    base, token, agent = sys.argv[1], sys.argv[2], sys.argv[3]
    if health.sync_detailed(client=Client(base_url=base)).status_code != 200:
        sys.exit("healthz")
    c = AuthenticatedClient(base_url=base, token=token, raise_on_unexpected_status=True)

    card = AgentCard.from_dict({
        "name": "python-client", "description": "an agent calling through the generated client", "version": "1",
        "supportedInterfaces": [{"url": "http://127.0.0.1:9/", "protocolBinding": "JSONRPC", "protocolVersion": "1.0"}],
        "capabilities": {"extensions": [{"uri": EXTENSION, "params": {
            "keepsTime": False, "lapseSkill": "lapse",
            "kinds": [{"kind": "payment", "subjectType": "invoice", "describes": "An invoice is paid", "basis": "contract"}]}}]},
        "defaultInputModes": ["text/plain"], "defaultOutputModes": ["text/plain"],
        "skills": [{"id": "lapse", "name": "lapse", "description": "handles lapses", "tags": ["lapse"]}],
    })
    r = put_agent_card.sync_detailed(agent_id=agent, client=c, body=card)
    if r.status_code != 200:
        fail("put card", r)

    due = datetime.datetime.now(datetime.timezone.utc).replace(microsecond=0) + datetime.timedelta(hours=1)
    raise_req = RaiseRequest(task_id="task-py", context_id="ctx-py", expectations=[Expectation(
        expectation_id="inv-py-paid", kind="payment", subject=Subject(type_="invoice", id="py"),
        expects="invoice py is paid", satisfied_by=SatisfiedBy(fact_key="invoice.py.paid"),
        due_at=due, grace="PT2H", basis="contract")])
    r = raise_expectations.sync_detailed(agent_id=agent, client=c, body=raise_req)
    if r.status_code != 200 or not isinstance(r.parsed, RecordsResponse):
        fail("raise", r)
    raised = r.parsed.records[0]
    if raised.state != ExpectationRecordState.OPEN:
        sys.exit(f"raised record is {raised.state}")

    # A bad request comes back as the generated Problem model.
    bad = RaiseRequest(task_id="task-py", context_id="ctx-py", expectations=[Expectation(
        expectation_id="inv-py-bad", kind="no-such-kind", subject=Subject(type_="invoice", id="py"),
        expects="x", satisfied_by=SatisfiedBy(fact_key="x"), due_at=due, basis="contract")])
    r = raise_expectations.sync_detailed(agent_id=agent, client=c, body=bad)
    if r.status_code != 400 or not isinstance(r.parsed, Problem) or not r.parsed.errors:
        fail("an unknown kind", r)
    problem_field = r.parsed.errors[0].path

    observed = datetime.datetime.now(datetime.timezone.utc).replace(microsecond=0)
    r = report_facts.sync_detailed(agent_id=agent, client=c, body=FactsRequest(facts=[
        Fact(fact_key="invoice.py.paid", observed_at=observed)]))
    if r.status_code != 200 or not isinstance(r.parsed, FactsResponse):
        fail("facts", r)
    satisfied = r.parsed.facts[0].satisfied

    r = get_expectation.sync_detailed(agent_id=agent, expectation_id="inv-py-paid", client=c)
    if r.status_code != 200 or not isinstance(r.parsed, ExpectationRecord):
        fail("get", r)
    rec = r.parsed
    print(json.dumps({
        "raisedState": raised.state.value,
        "problemField": problem_field,
        "satisfied": satisfied,
        "state": rec.state.value,
        "satisfiedBy": rec.satisfied_by.fact_key if rec.satisfied_by else None,
        "dueAt": rec.due_at,
        "grace": rec.expectation.grace,
    }))


if __name__ == "__main__":
    main()

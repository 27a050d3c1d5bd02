"""An agent turn instrumented as OpenInference instrumentors write it,
exported with the OpenTelemetry Python SDK's OTLP/HTTP exporter to
clockwork, which grades the plan from the trace.

The exporter is configured by the standard variables alone:
OTEL_EXPORTER_OTLP_TRACES_ENDPOINT (https://clockwork.example.com/v1/traces)
and OTEL_EXPORTER_OTLP_TRACES_HEADERS (Authorization=Bearer <token>). The
plan is bound by the conversation id (gen_ai.conversation.id, the
ANTICIPATE's session_id), given as the first argument; the agent's id is
the second; the tools to call follow.

    python agent.py conv-42 agent-1 iam_create_user iam_add_to_group
"""

import json
import sys

from opentelemetry import trace
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor


def main(conversation, agent, tools):
    provider = TracerProvider(resource=Resource.create({"service.name": "onboarding-agent", "gen_ai.agent.id": agent}))
    provider.add_span_processor(SimpleSpanProcessor(OTLPSpanExporter()))
    tracer = provider.get_tracer("onboarding")
    common = {"gen_ai.conversation.id": conversation}
    with tracer.start_as_current_span("onboarding", attributes={
            **common, "openinference.span.kind": "AGENT", "gen_ai.operation.name": "invoke_agent", "aigp.plan_root": True}):
        for tool in tools:
            with tracer.start_as_current_span(tool, attributes={
                    **common, "openinference.span.kind": "TOOL", "tool.name": tool,
                    "tool.parameters": json.dumps({"username": "alice"})}):
                pass
    provider.shutdown()


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], sys.argv[3:])

"""``examples/serverless/template.yaml``, the SAM template of the whole pipeline: cfn-lint
passes on it; aws-sam-translator transforms it; the CloudFormation stack is created on
moto's CloudFormation; the created resources are what the pipeline needs (the stream,
the redrive, the mappings' response types, bisect and on-failure destination, the
policies of docs/iam-policy-serverless.json); and the example's handlers then run on
those very resources, the completion on records read from the stack's table stream
through the stream mapping's filters, every batch twice.

moto's CloudFormation creates the table without its ``TimeToLiveSpecification`` and the
bucket without its ``NotificationConfiguration`` (it ignores both properties): those two
are checked in the transformed template that CloudFormation receives."""

from __future__ import annotations

import ast
import io
import json
import zipfile
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import unquote

import boto3
import pytest
from moto import mock_aws
from serverless_helpers import EXAMPLE, example, jsonl, summary

from xor_ack_dynamodb.serverless import StreamPoller
from xor_ack_dynamodb.serverless.stream import read_change

TEMPLATE = EXAMPLE / "template.yaml"
POLICY = Path(__file__).resolve().parent.parent / "docs" / "iam-policy-serverless.json"
REGION, ACCOUNT = "us-east-1", "123456789012"
INPUT = "wordcount-uploads"


def test_cfn_lint_passes_on_the_template() -> None:
    from cfnlint.api import ManualArgs, lint_file

    matches = lint_file(TEMPLATE, config=ManualArgs(regions=[REGION]))
    assert [str(m) for m in matches] == []


@dataclass
class Stack:
    template: dict[str, Any]  # as transformed: what CloudFormation receives
    resources: dict[str, str]  # logical id -> physical id

    def client(self, service: str) -> Any:
        return boto3.client(service, region_name=REGION)

    def function_env(self, logical: str) -> dict[str, str]:
        config = self.client("lambda").get_function_configuration(FunctionName=self.resources[logical])
        found: dict[str, str] = config["Environment"]["Variables"]
        return found

    def queue_arn(self, logical: str) -> str:
        attributes = self.client("sqs").get_queue_attributes(
            QueueUrl=self.resources[logical], AttributeNames=["QueueArn"]
        )
        found: str = attributes["Attributes"]["QueueArn"]
        return found

    def mapping(self, logical: str) -> dict[str, Any]:
        found: dict[str, Any] = self.client("lambda").get_event_source_mapping(UUID=self.resources[logical])
        return found


@pytest.fixture
def stack() -> Iterator[Stack]:
    from samtranslator.translator.managed_policy_translator import ManagedPolicyLoader
    from samtranslator.translator.transform import transform
    from samtranslator.yaml_helper import yaml_parse

    with mock_aws():
        # What `sam build && sam deploy` does first: package the code to S3 and point the
        # functions at it.
        s3 = boto3.client("s3", region_name=REGION)
        s3.create_bucket(Bucket="sam-artifacts")
        package = io.BytesIO()
        with zipfile.ZipFile(package, "w") as archive:
            archive.write(EXAMPLE / "lambda_function.py", "lambda_function.py")
        s3.put_object(Bucket="sam-artifacts", Key="wordcount.zip", Body=package.getvalue())
        template = yaml_parse(TEMPLATE.read_text())
        template["Globals"]["Function"]["CodeUri"] = "s3://sam-artifacts/wordcount.zip"
        parameters = {"InputBucketName": INPUT}
        loader = ManagedPolicyLoader(boto3.client("iam", region_name=REGION))
        transformed = transform(template, parameters, loader)
        cloudformation = boto3.client("cloudformation", region_name=REGION)
        cloudformation.create_stack(
            StackName="wordcount",
            TemplateBody=json.dumps(transformed),
            Parameters=[{"ParameterKey": k, "ParameterValue": v} for k, v in parameters.items()],
            Capabilities=["CAPABILITY_IAM"],
        )
        [described] = cloudformation.describe_stacks(StackName="wordcount")["Stacks"]
        assert described["StackStatus"] == "CREATE_COMPLETE", described.get("StackStatusReason")
        summaries = cloudformation.list_stack_resources(StackName="wordcount")["StackResourceSummaries"]
        assert all(r["ResourceStatus"] == "CREATE_COMPLETE" for r in summaries)
        yield Stack(transformed, {r["LogicalResourceId"]: r["PhysicalResourceId"] for r in summaries})


def test_the_stack_has_what_the_pipeline_needs(stack: Stack) -> None:
    resources = stack.template["Resources"]
    env = stack.function_env("WorkFunction")
    # The chains table: String key tagID, a stream of new and old images, TTL on expires_at.
    table = stack.client("dynamodb").describe_table(TableName=stack.resources["Chains"])["Table"]
    assert table["KeySchema"] == [{"AttributeName": "tagID", "KeyType": "HASH"}]
    assert table["StreamSpecification"] == {"StreamEnabled": True, "StreamViewType": "NEW_AND_OLD_IMAGES"}
    assert resources["Chains"]["Properties"]["TimeToLiveSpecification"] == {
        "AttributeName": "expires_at",
        "Enabled": True,
    }
    assert env["XOR_ACK_TABLE"] == stack.resources["Chains"]
    # Queues: a DLQ each, maxReceiveCount above the library's receive limit, so a poison
    # message fails its chain before the queue gives up on it.
    sqs = stack.client("sqs")
    for queue, dead in (("WorkQueue", "WorkDeadLetters"), ("CompletionQueue", "CompletionDeadLetters")):
        attributes = sqs.get_queue_attributes(QueueUrl=stack.resources[queue], AttributeNames=["All"])[
            "Attributes"
        ]
        redrive = json.loads(attributes["RedrivePolicy"])
        assert redrive["deadLetterTargetArn"] == stack.queue_arn(dead)
        assert int(redrive["maxReceiveCount"]) > int(env["XOR_ACK_MAX_RECEIVES"])
        assert int(attributes["VisibilityTimeout"]) >= 6 * 30  # 6 x the function timeout
    assert stack.resources["CompletionQueue"].endswith(".fifo")  # the completion id deduplicates
    assert env["XOR_ACK_COMPLETION_QUEUE_URL"] == stack.resources["CompletionQueue"]
    assert float(env["XOR_ACK_COMPLETION_LEASE_SECONDS"]) > 30  # above the function timeout
    assert float(env["XOR_ACK_RETENTION_SECONDS"]) > 24 * 3600  # above the stream's retention
    # The mappings: partial batch responses; the stream's bisects, retries and then parks
    # what it gives up on; it reads only the transitions.
    work = stack.mapping("WorkFunctionWork")
    assert work["EventSourceArn"] == stack.queue_arn("WorkQueue")
    assert work["FunctionResponseTypes"] == ["ReportBatchItemFailures"] and work["BatchSize"] == 10
    chain_stream = stack.mapping("CompletionFunctionChainStream")
    assert chain_stream["EventSourceArn"] == table["LatestStreamArn"]
    assert chain_stream["FunctionResponseTypes"] == ["ReportBatchItemFailures"]
    assert chain_stream["BisectBatchOnFunctionError"] is True
    assert chain_stream["DestinationConfig"]["OnFailure"]["Destination"] == stack.queue_arn(
        "CompletionFailures"
    )
    assert (
        chain_stream["StartingPosition"] == "TRIM_HORIZON"
        and len(chain_stream["FilterCriteria"]["Filters"]) == 4
    )
    assert stack.mapping("DoneFunctionDone")["EventSourceArn"] == stack.queue_arn("CompletionQueue")
    functions = stack.client("lambda")
    handlers = {
        logical: functions.get_function_configuration(FunctionName=stack.resources[logical])["Handler"]
        for logical in ("UploadFunction", "WorkFunction", "CompletionFunction", "DoneFunction")
    }
    assert handlers == {
        "UploadFunction": "lambda_function.on_upload",
        "WorkFunction": "lambda_function.on_work",
        "CompletionFunction": "lambda_function.on_chain_stream",
        "DoneFunction": "lambda_function.on_done",
    }
    # The S3 notification: uploads to the input bucket invoke on_upload.
    [notification] = resources["InputBucket"]["Properties"]["NotificationConfiguration"][
        "LambdaConfigurations"
    ]
    assert notification["Event"] == "s3:ObjectCreated:*"
    assert notification["Function"] == {"Fn::GetAtt": ["UploadFunction", "Arn"]}


def role_statements(stack: Stack) -> dict[str, tuple[set[str], set[str]]]:
    """Every statement of the stack's roles by Sid: its actions and resources."""
    iam = stack.client("iam")
    found: dict[str, tuple[set[str], set[str]]] = {}
    for logical in ("WorkerRole", "CompletionRole", "DoneRole"):
        role = stack.resources[logical]
        for name in iam.list_role_policies(RoleName=role)["PolicyNames"]:
            document = iam.get_role_policy(RoleName=role, PolicyName=name)["PolicyDocument"]
            if isinstance(document, str):  # moto hands back the document as it stored it
                text = unquote(document)
                document = json.loads(text) if text.startswith('{"') else ast.literal_eval(text)
            for statement in document["Statement"]:
                actions, resources = found.setdefault(statement["Sid"], (set(), set()))
                actions.update(_listed(statement["Action"]))
                resources.update(_listed(statement["Resource"]))
    return found


def _listed(value: str | list[str]) -> list[str]:
    return [value] if isinstance(value, str) else list(value)


def test_the_roles_are_the_documented_least_privilege_policy(stack: Stack) -> None:
    names = {
        "REGION": REGION,
        "ACCOUNT_ID": ACCOUNT,
        "TABLE_NAME": stack.resources["Chains"],
        "COMPLETION_FAILURES_QUEUE": stack.queue_arn("CompletionFailures").rsplit(":", 1)[1],
        "COMPLETION_QUEUE": stack.queue_arn("CompletionQueue").rsplit(":", 1)[1],
        "WORK_QUEUE": stack.queue_arn("WorkQueue").rsplit(":", 1)[1],
        "INPUT_BUCKET": INPUT,
        "OUTPUT_BUCKET": stack.resources["OutputBucket"],
    }
    text = POLICY.read_text()
    for placeholder, value in names.items():
        text = text.replace(placeholder, value)
    documented = {
        s["Sid"]: (set(_listed(s["Action"])), set(_listed(s["Resource"])))
        for s in json.loads(text)["Statement"]
        if s["Sid"] != "CompletionEvents"  # the EventBridge target; the template's target is SQS
    }
    assert role_statements(stack) == documented
    functions = stack.client("lambda")
    roles = {
        logical: functions.get_function_configuration(FunctionName=stack.resources[logical])["Role"].rsplit(
            "/", 1
        )[1]
        for logical in ("UploadFunction", "WorkFunction", "CompletionFunction", "DoneFunction")
    }
    assert roles == {
        "UploadFunction": stack.resources["WorkerRole"],
        "WorkFunction": stack.resources["WorkerRole"],
        "CompletionFunction": stack.resources["CompletionRole"],
        "DoneFunction": stack.resources["DoneRole"],
    }


def filtered(stack: Stack, records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The records the stream mapping's filters let through, as Lambda filters them
    (moto's implementation of the EventBridge pattern syntax Lambda uses)."""
    from moto.events.models import EventPattern

    patterns = [
        EventPattern.load(f["Pattern"])
        for f in stack.mapping("CompletionFunctionChainStream")["FilterCriteria"]["Filters"]
    ]
    return [r for r in records if any(p.matches_event(r) for p in patterns)]


def play_the_mappings_here(stack: Stack) -> None:
    """This test's pollers play Lambda's event source mappings: moto would run the
    functions itself, in Docker. Its SQS mappings honour ``Enabled``; its stream mapping
    does not, so it is detached from moto's table too."""
    from moto.dynamodb.models import dynamodb_backends

    functions = stack.client("lambda")
    for logical in ("WorkFunctionWork", "CompletionFunctionChainStream", "DoneFunctionDone"):
        functions.update_event_source_mapping(UUID=stack.resources[logical], Enabled=False)
    dynamodb_backends[ACCOUNT][REGION].get_table(stack.resources["Chains"]).lambda_event_source_mappings.clear()


def test_the_example_runs_on_the_stacks_resources(stack: Stack, monkeypatch: pytest.MonkeyPatch) -> None:
    play_the_mappings_here(stack)
    local, fn = example("run_local"), example("lambda_function")
    for name, value in stack.function_env("WorkFunction").items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("POWERTOOLS_METRICS_DISABLED", "true")
    monkeypatch.setattr(fn, "CHUNK", 4)
    monkeypatch.setattr(fn, "LEAF", 2)
    fn.pipeline.cache_clear()
    s3, sqs, dynamodb = stack.client("s3"), stack.client("sqs"), stack.client("dynamodb")
    inputs = {f"in/{i}.jsonl": jsonl(9 + i, seed=i) for i in range(2)}
    tags = []
    for key, (body, _) in inputs.items():
        event = local.upload(s3, key, body, INPUT)
        for _ in range(2):  # S3 delivers the event twice
            tags += fn.on_upload(event, None)["started"]
    assert len(set(tags)) == 2
    local.poll(sqs, stack.resources["WorkQueue"], fn.on_work, twice=True)
    seen: list[dict[str, Any]] = []

    def completion_function(event: dict[str, Any], context: Any) -> Any:  # behind the mapping's filters
        seen.extend(event["Records"])
        return fn.on_chain_stream({"Records": filtered(stack, event["Records"])}, context)

    poller = StreamPoller.for_table(
        dynamodb, None, stack.resources["Chains"], completion_function, twice=True
    )
    poller.drain()
    reader = fn.pipeline().item_reader()
    changes = [r for r in seen if read_change(r, reader) is not None]
    assert len(changes) >= 2 and filtered(stack, changes) == changes  # the filters drop no transition
    assert len(filtered(stack, seen)) < len(seen) / 2  # and most of the rest
    done = local.poll(sqs, stack.resources["CompletionQueue"], fn.on_done)
    assert done == 2  # one completion per object, on the FIFO queue
    events = fn.pipeline().stats.events
    assert events["completions.fired"] == 2
    output = stack.resources["OutputBucket"]
    for tag, (_, expected) in zip(sorted(set(tags), key=tags.index), inputs.values(), strict=True):
        assert fn.pipeline().tracker.status(tag).state == "acked"
        assert summary(s3, output, tag) == {"tag": tag, "words": dict(sorted(Counter(expected).items()))}

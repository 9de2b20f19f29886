"""gateway_engine/signing.py (AWS SigV4) against AWS's published test vectors and botocore's signer."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import pytest

from gateway_engine.signing import Credentials, canonical_uri, sign

# AWS Signature Version 4 test suite (docs.aws.amazon.com/general/latest/gr/signature-v4-test-suite.html)
SUITE = Credentials("AKIDEXAMPLE", "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY")
SUITE_TIME = datetime(2015, 8, 30, 12, 36, 0, tzinfo=UTC)


def test_get_vanilla_of_the_aws_test_suite():
    headers = sign(
        "GET",
        "https://example.amazonaws.com/",
        {},
        b"",
        SUITE,
        region="us-east-1",
        service="service",
        now=SUITE_TIME,
    )
    assert headers["X-Amz-Date"] == "20150830T123600Z"
    assert headers["Authorization"] == (
        "AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/20150830/us-east-1/service/aws4_request, "
        "SignedHeaders=host;x-amz-date, "
        "Signature=5fa00fa31553b73ebf1942676e86291e8372ff2a2260956d9b8aae1d763fbf31"
    )


def test_a_changed_input_changes_the_signature():
    base = sign(
        "POST",
        "https://h/model/m/converse",
        {"Content-Type": "application/json"},
        b"{}",
        SUITE,
        region="us-east-1",
        service="bedrock",
        now=SUITE_TIME,
    )["Authorization"]
    for change in (dict(body=b"{ }"), dict(region="us-west-2"), dict(url="https://h/model/n/converse")):
        args = {"url": "https://h/model/m/converse", "body": b"{}", "region": "us-east-1", **change}
        other = sign(
            "POST",
            args["url"],
            {"Content-Type": "application/json"},
            args["body"],
            SUITE,
            region=args["region"],
            service="bedrock",
            now=SUITE_TIME,
        )["Authorization"]
        assert other != base, change


def test_the_path_is_encoded_twice_as_for_every_service_but_s3():
    assert canonical_uri("/model/anthropic.claude-3-haiku-20240307-v1%3A0/converse") == (
        "/model/anthropic.claude-3-haiku-20240307-v1%253A0/converse"
    )


@pytest.mark.parametrize(
    "url",
    [
        "https://bedrock-runtime.eu-west-1.amazonaws.com/model/anthropic.claude-3-haiku-20240307-v1%3A0/converse",
        "http://127.0.0.1:8123/br1/model/amazon.nova-lite-v1%3A0/converse-stream",
    ],
)
def test_the_same_signature_as_botocore_for_the_same_request(url):
    botocore = pytest.importorskip("botocore")
    from botocore.auth import SigV4Auth
    from botocore.awsrequest import AWSRequest
    from botocore.credentials import Credentials as BotoCredentials

    body = json.dumps({"messages": [{"role": "user", "content": [{"text": "hi"}]}]}).encode()
    theirs = AWSRequest("POST", url, data=body, headers={"Content-Type": "application/json"})
    SigV4Auth(BotoCredentials("AKIAEXAMPLE", "secret/with+chars", "tok"), "bedrock", "eu-west-1").add_auth(
        theirs
    )
    when = datetime.strptime(theirs.headers["X-Amz-Date"], "%Y%m%dT%H%M%SZ").replace(tzinfo=UTC)
    ours = sign(
        "POST",
        url,
        {"Content-Type": "application/json"},
        body,
        Credentials("AKIAEXAMPLE", "secret/with+chars", "tok"),
        region="eu-west-1",
        service="bedrock",
        now=when,
    )
    assert botocore.__version__
    assert ours["Authorization"] == theirs.headers["Authorization"]
    assert ours["X-Amz-Security-Token"] == theirs.headers["X-Amz-Security-Token"]

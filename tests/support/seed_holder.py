#!/usr/bin/env python3
"""A bucket-lease holder written from the seed's specification alone, for
interoperability tests: the seed's four fields, no generation, no
`released_at`; takes an absent key with `If-None-Match: *` and a record
renewed at least `ttl_s` ago (by this host's clock) with `If-Match`; renews
every ttl/3 with `If-Match`; deletes with `If-Match` on release.

Usage: seed_holder.py --endpoint-url URL --bucket B --prefix P/ --instance-id ID
                      [--ttl 30] [--hold 1.0]
Prints one line per step ("acquired ETAG", "renewed ETAG", "released") on
stdout; exits 0 when it held and released, 2 when the lease was held by
someone else (fresh), 1 on any other failure.
Credentials and region come from the usual AWS environment variables.
"""
import argparse
import json
import sys
import time
from datetime import datetime, timedelta, timezone

import boto3
from botocore.config import Config
from botocore.exceptions import ClientError


def stamp(t):
    return t.strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--endpoint-url", required=True)
    ap.add_argument("--bucket", required=True)
    ap.add_argument("--prefix", required=True)
    ap.add_argument("--instance-id", required=True)
    ap.add_argument("--ttl", type=int, default=30)
    ap.add_argument("--hold", type=float, default=1.0)
    a = ap.parse_args()
    s3 = boto3.client(
        "s3",
        endpoint_url=a.endpoint_url,
        config=Config(s3={"addressing_style": "path"}, retries={"max_attempts": 1}),
    )
    key = a.prefix + "LEASE"
    acquired = datetime.now(timezone.utc)

    def body(now):
        return json.dumps(
            {
                "instance_id": a.instance_id,
                "acquired_at": stamp(acquired),
                "renewed_at": stamp(now),
                "ttl_s": a.ttl,
            }
        ).encode()

    try:
        cur = s3.get_object(Bucket=a.bucket, Key=key)
        rec = json.loads(cur["Body"].read())
        renewed = datetime.fromisoformat(rec["renewed_at"].replace("Z", "+00:00"))
        if datetime.now(timezone.utc) - renewed < timedelta(seconds=int(rec["ttl_s"])):
            print(f"held by {rec['instance_id']}", flush=True)
            return 2
        out = s3.put_object(
            Bucket=a.bucket, Key=key, Body=body(datetime.now(timezone.utc)), IfMatch=cur["ETag"]
        )
    except ClientError as e:
        if e.response["Error"]["Code"] not in ("NoSuchKey", "404"):
            raise
        out = s3.put_object(
            Bucket=a.bucket, Key=key, Body=body(datetime.now(timezone.utc)), IfNoneMatch="*"
        )
    etag = out["ETag"]
    print(f"acquired {etag}", flush=True)
    end = time.monotonic() + a.hold
    while time.monotonic() < end:
        time.sleep(min(a.ttl / 3, max(0.0, end - time.monotonic())))
        out = s3.put_object(
            Bucket=a.bucket, Key=key, Body=body(datetime.now(timezone.utc)), IfMatch=etag
        )
        etag = out["ETag"]
        print(f"renewed {etag}", flush=True)
    s3.delete_object(Bucket=a.bucket, Key=key, IfMatch=etag)
    print("released", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())

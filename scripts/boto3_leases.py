#!/usr/bin/env python3
"""The baseline for scripts/compare.sh: what an operator writes without leasectl.

Lists the prefixes directly under s3://BUCKET/PATH/ (ListObjectsV2, delimiter
"/", every page), GETs each {prefix}LEASE from a pool of 32 threads, parses the
record and judges it fresh or stale by this machine's clock. Prints one JSON
summary on stdout.

Usage: boto3_leases.py [--endpoint-url URL] [--threads 32] s3://bucket/path/
Credentials and region come from the usual AWS environment variables.
"""
import argparse
import json
import sys
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime, timezone

import boto3
from botocore.config import Config


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--endpoint-url")
    ap.add_argument("--threads", type=int, default=32)
    ap.add_argument("target")
    args = ap.parse_args()
    bucket, _, root = args.target.removeprefix("s3://").partition("/")
    s3 = boto3.client(
        "s3",
        endpoint_url=args.endpoint_url,
        config=Config(
            max_pool_connections=args.threads,
            s3={"addressing_style": "path"},
            retries={"max_attempts": 2},
        ),
    )

    prefixes = []
    for page in s3.get_paginator("list_objects_v2").paginate(
        Bucket=bucket, Prefix=root, Delimiter="/"
    ):
        prefixes += [p["Prefix"] for p in page.get("CommonPrefixes", [])]

    def read(prefix):
        try:
            obj = s3.get_object(Bucket=bucket, Key=prefix + "LEASE")
        except s3.exceptions.NoSuchKey:
            return prefix, "absent"
        try:
            rec = json.loads(obj["Body"].read())
            renewed = datetime.fromisoformat(rec["renewed_at"].replace("Z", "+00:00"))
            age = (datetime.now(timezone.utc) - renewed).total_seconds()
            return prefix, "fresh" if age < rec["ttl_s"] else "stale"
        except (ValueError, KeyError, TypeError):
            return prefix, "malformed"

    with ThreadPoolExecutor(args.threads) as pool:
        states = dict(pool.map(read, prefixes))
    counts = {}
    for s in states.values():
        counts[s] = counts.get(s, 0) + 1
    json.dump({"prefixes": len(states), "states": counts}, sys.stdout)
    print()


if __name__ == "__main__":
    main()

"""What a second, independent S3 client sees of an object (the tests' `StorageServer::inspect`).

Usage: python3 s3_inspect.py ENDPOINT tags|encryption BUCKET KEY
  tags        one `key=value` line per tag of the object
  encryption  the ServerSideEncryption and SSEKMSKeyId of a HEAD, one line each (empty if absent)
"""
import sys

import boto3

endpoint, what, bucket, key = sys.argv[1:5]
client = boto3.client(
    "s3",
    endpoint_url=endpoint,
    region_name="us-east-1",
    aws_access_key_id="testing",
    aws_secret_access_key="testing",
)
if what == "tags":
    tags = client.get_object_tagging(Bucket=bucket, Key=key)["TagSet"]
    lines = [tag["Key"] + "=" + tag["Value"] for tag in tags]
else:
    head = client.head_object(Bucket=bucket, Key=key)
    lines = [head.get("ServerSideEncryption", ""), head.get("SSEKMSKeyId", "")]
print("\n".join(lines))

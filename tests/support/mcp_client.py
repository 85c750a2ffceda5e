"""An independent MCP-over-xDS subscriber for tests/xds/mcp_python_client.rs.

Generates its own Python message classes from the project's .proto files (grpc_tools.protoc, into --out), opens one
ADS stream (SotW or Delta, the ADS stubs of the xds-protos package), subscribes to every collection given, ACKs
every response, and once each collection has been answered prints one JSON document on stdout:
{"collections": {COLLECTION: [{"name", "version", "labels", "annotations", "create_time", "body_type", "spec"}]}}
where "spec" is the body decoded with protobuf and written by json_format (proto JSON, camelCase names).
"""

import argparse
import importlib
import json
import os
import pathlib
import sys
import threading
import queue

import grpc
from grpc_tools import protoc


def generate(proto_root, out):
    """Compiles every .proto under the istio/ and higress/ folders of proto_root into out; imports them all."""
    proto_root = pathlib.Path(proto_root)
    files = sorted(
        str(p.relative_to(proto_root))
        for folder in ("istio", "higress")
        if (proto_root / folder).exists()
        for p in (proto_root / folder).rglob("*.proto")
    )
    well_known = str(pathlib.Path(protoc.__file__).parent / "_proto")
    code = protoc.main(["protoc", f"-I{proto_root}", f"-I{well_known}", f"--python_out={out}", *files])
    if code != 0:
        sys.exit(f"protoc failed ({code})")
    sys.path.insert(0, out)
    modules = {}
    for name in files:
        module = name[: -len(".proto")].replace("/", ".") + "_pb2"
        modules[name] = importlib.import_module(module)
    return modules


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--server", required=True)
    parser.add_argument("--proto-root", required=True)
    parser.add_argument("--out", required=True)
    parser.add_argument("--api", choices=["sotw", "delta"], default="sotw")
    parser.add_argument("--collections", required=True, help="comma-separated")
    args = parser.parse_args()

    generate(args.proto_root, args.out)
    from google.protobuf import json_format, symbol_database
    from envoy.config.core.v3 import base_pb2
    from envoy.service.discovery.v3 import ads_pb2_grpc, discovery_pb2
    from istio.mcp.v1alpha1 import resource_pb2

    collections = [c for c in args.collections.split(",") if c]
    node = base_pb2.Node(id="python-mcp-client")
    requests = queue.Queue()
    stub = ads_pb2_grpc.AggregatedDiscoveryServiceStub(grpc.insecure_channel(args.server))
    delta = args.api == "delta"
    for i, collection in enumerate(collections):
        if delta:
            request = discovery_pb2.DeltaDiscoveryRequest(type_url=collection)
        else:
            request = discovery_pb2.DiscoveryRequest(type_url=collection)
        if i == 0:
            request.node.CopyFrom(node)
        requests.put(request)

    def request_iterator():
        while True:
            item = requests.get()
            if item is None:
                return
            yield item

    call = (stub.DeltaAggregatedResources if delta else stub.StreamAggregatedResources)(
        request_iterator(), timeout=60
    )
    database = symbol_database.Default()
    result = {}
    for response in call:
        entries = []
        anys = [r.resource for r in response.resources] if delta else list(response.resources)
        for packed in anys:
            resource = resource_pb2.Resource()
            if not packed.Unpack(resource):
                sys.exit(f"not an istio.mcp.v1alpha1.Resource: {packed.type_url}")
            body_type = resource.body.type_url.split("/", 1)[1]
            body = database.GetSymbol(body_type)()
            if not resource.body.Unpack(body):
                sys.exit(f"body of {resource.metadata.name} is not a {body_type}")
            entries.append(
                {
                    "name": resource.metadata.name,
                    "version": resource.metadata.version,
                    "labels": dict(resource.metadata.labels),
                    "annotations": dict(resource.metadata.annotations),
                    "create_time": resource.metadata.create_time.ToJsonString()
                    if resource.metadata.HasField("create_time")
                    else None,
                    "body_type": resource.body.type_url,
                    "spec": json_format.MessageToDict(body),
                }
            )
        if delta:
            ack = discovery_pb2.DeltaDiscoveryRequest(type_url=response.type_url, response_nonce=response.nonce)
        else:
            ack = discovery_pb2.DiscoveryRequest(
                type_url=response.type_url, response_nonce=response.nonce, version_info=response.version_info
            )
        requests.put(ack)
        result.setdefault(response.type_url, []).extend(entries)
        if all(c in result for c in collections):
            break
    print(json.dumps({"collections": result}, sort_keys=True))
    sys.stdout.flush()
    requests.put(None)
    call.cancel()


if __name__ == "__main__":
    main()

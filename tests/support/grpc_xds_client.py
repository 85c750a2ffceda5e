"""Proxyless gRPC xDS client for tests/e2e/e2e_grpc_xds.rs.

Starts a gRPC health server on 127.0.0.1 (prints "BACKEND <port>"), waits for "GO" on stdin (the Rust test
has then configured the xDS server to route to that port), resolves xds:///<target> through the xDS server
named in GRPC_XDS_BOOTSTRAP_CONFIG and makes a health-check RPC through it. Prints "RESULT <status>" and one
"CSDS <type> <name> <status>" line per resource grpcio holds, then exits 0; on failure prints "ERROR ...".
"""

import sys
from concurrent import futures

import grpc
import grpc_csds
from envoy.admin.v3 import config_dump_shared_pb2
from envoy.service.status.v3 import csds_pb2
from grpc_health.v1 import health, health_pb2, health_pb2_grpc


def main() -> int:
    target = sys.argv[1]
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
    servicer = health.HealthServicer()
    servicer.set("", health_pb2.HealthCheckResponse.SERVING)
    health_pb2_grpc.add_HealthServicer_to_server(servicer, server)
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    print(f"BACKEND {port}", flush=True)
    if sys.stdin.readline().strip() != "GO":
        print("ERROR no GO", flush=True)
        return 1
    try:
        with grpc.insecure_channel(f"xds:///{target}") as channel:
            stub = health_pb2_grpc.HealthStub(channel)
            reply = stub.Check(health_pb2.HealthCheckRequest(), timeout=20, wait_for_ready=True)
            print(f"RESULT {health_pb2.HealthCheckResponse.ServingStatus.Name(reply.status)}", flush=True)
            status = grpc_csds.ClientStatusDiscoveryServiceServicer.FetchClientStatus(
                csds_pb2.ClientStatusRequest(), None
            )
            for config in status.config:
                for generic in config.generic_xds_configs:
                    state = config_dump_shared_pb2.ClientResourceStatus.Name(generic.client_status)
                    kind = generic.type_url.rsplit(".", 1)[-1]
                    print(f"CSDS {kind} {generic.name} {state}", flush=True)
    except grpc.RpcError as error:
        print(f"ERROR {error.code()} {error.details()}", flush=True)
        return 1
    finally:
        server.stop(None)
    return 0


if __name__ == "__main__":
    sys.exit(main())

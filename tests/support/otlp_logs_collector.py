"""An OpenTelemetry logs collector for the e2e tests: serves OTLP LogsService/Export over gRPC on 127.0.0.1 (a free
port), prints `PORT <port>`, then one JSON line per log record received: its body, string attributes and the
scope name. Runs until killed (the test kills it on drop)."""
import json
from concurrent import futures

import grpc
from opentelemetry.proto.collector.logs.v1 import logs_service_pb2, logs_service_pb2_grpc


def text(value):
    kind = value.WhichOneof("value")
    return getattr(value, kind) if kind else None


class Collector(logs_service_pb2_grpc.LogsServiceServicer):
    def Export(self, request, context):
        for resource_logs in request.resource_logs:
            for scope_logs in resource_logs.scope_logs:
                for record in scope_logs.log_records:
                    line = {
                        "scope": scope_logs.scope.name,
                        "body": text(record.body),
                        "attributes": {kv.key: text(kv.value) for kv in record.attributes},
                    }
                    print(json.dumps(line), flush=True)
        return logs_service_pb2.ExportLogsServiceResponse()


def main():
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
    logs_service_pb2_grpc.add_LogsServiceServicer_to_server(Collector(), server)
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    print(f"PORT {port}", flush=True)
    server.wait_for_termination()


if __name__ == "__main__":
    main()

"""Closed-loop load from Python's standard clients: grpcio (C-core) or http.client.

Usage: python3 python_load.py grpc|http TARGET CONCURRENCY SECONDS STUB_DIR < input.bin
  grpc: TARGET is host:port; ModelInfer of model "m", input "input" [1,3,224,224] FP32 raw.
  http: TARGET is host:port; POST /v2/models/m/infer with the binary-data extension.
Prints {"requests", "errors", "seconds"} as JSON. One thread per caller; gRPC callers share
one channel (HTTP/2 multiplexing, as grpcio does by default), HTTP callers keep one
connection each.
"""

import http.client
import json
import resource
import sys
import threading
import time

mode, target, concurrency, seconds, stubs = sys.argv[1:6]
concurrency, seconds = int(concurrency), float(seconds)
data = sys.stdin.buffer.read()
SHAPE = [1, 3, 224, 224]
OUTPUT_BYTES = 1000 * 4

counts = {"requests": 0, "errors": 0}
lock = threading.Lock()


def count(ok):
    with lock:
        counts["requests"] += 1
        if not ok:
            counts["errors"] += 1


def grpc_caller(stub, request, deadline):
    while time.monotonic() < deadline:
        try:
            answer = stub.ModelInfer(request, timeout=60)
            count(len(answer.raw_output_contents[0]) == OUTPUT_BYTES)
        except Exception:  # noqa: BLE001 - every failure counts as an error
            count(False)


def http_caller(body, header_length, deadline):
    host, port = target.rsplit(":", 1)
    connection = http.client.HTTPConnection(host, int(port), timeout=60)
    headers = {
        "Inference-Header-Content-Length": str(header_length),
        "Content-Type": "application/octet-stream",
    }
    while time.monotonic() < deadline:
        try:
            connection.request("POST", "/v2/models/m/infer", body, headers)
            response = connection.getresponse()
            answer = response.read()
            count(response.status == 200 and len(answer) > OUTPUT_BYTES)
        except Exception:  # noqa: BLE001
            count(False)
            connection.close()
            connection = http.client.HTTPConnection(host, int(port), timeout=60)


def main():
    threads = []
    started = time.monotonic()
    deadline = started + seconds
    if mode == "grpc":
        sys.path.insert(0, stubs)
        import grpc
        import grpc_predict_v2_pb2 as pb
        import grpc_predict_v2_pb2_grpc as pb_grpc

        channel = grpc.insecure_channel(target, options=[("grpc.max_receive_message_length", -1)])
        stub = pb_grpc.GRPCInferenceServiceStub(channel)
        request = pb.ModelInferRequest(model_name="m")
        tensor = request.inputs.add(name="input", datatype="FP32")
        tensor.shape.extend(SHAPE)
        request.raw_input_contents.append(data)
        threads = [
            threading.Thread(target=grpc_caller, args=(stub, request, deadline))
            for _ in range(concurrency)
        ]
    else:
        header = json.dumps(
            {
                "inputs": [
                    {
                        "name": "input",
                        "shape": SHAPE,
                        "datatype": "FP32",
                        "parameters": {"binary_data_size": len(data)},
                    }
                ],
                "parameters": {"binary_data_output": True},
            }
        ).encode()
        threads = [
            threading.Thread(target=http_caller, args=(header + data, len(header), deadline))
            for _ in range(concurrency)
        ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    counts["seconds"] = time.monotonic() - started
    # The client's own CPU (every thread, gRPC's C-core ones included): on a machine it
    # shares with the server, what one protocol's client costs comes off the server's cores.
    usage = resource.getrusage(resource.RUSAGE_SELF)
    counts["cpu_seconds"] = usage.ru_utime + usage.ru_stime
    json.dump(counts, sys.stdout)


main()
